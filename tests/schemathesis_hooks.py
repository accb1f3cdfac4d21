"""schemathesis hooks for `tests/cli_docs.rs` (loaded through SCHEMATHESIS_HOOKS).

A long-poll (`GET /v1/inbox?wait=S`, `GET /v1/directives/{id}?wait=S`) answers after S seconds
when nothing arrives, and the fuzzer's inbox is empty: drawn as the document allows (up to 60),
the waits alone would take most of an hour. A valid wait of 2 s or more is sent as 1 s, so the
waiting path still runs (and answers empty) and the boundaries the document declares (0, and
everything invalid: over 60, fractions, words) still reach the server as drawn.

Deliberately changes nothing else of any request.
"""

import schemathesis


@schemathesis.hook
def before_call(context, case, kwargs):
    query = case.query
    if not isinstance(query, dict) or "wait" not in query:
        return
    wait = query["wait"]
    text = str(wait)
    if not isinstance(wait, bool) and text.isdigit() and 2 <= int(text) <= 60:
        query["wait"] = 1 if isinstance(wait, int) else "1"
