"""The base of the typed errors (``SignalbusError``, its §8 statuses) and ``ProtocolError``.

A leaf: it imports no module of the package. ``types`` (whose parsing raises ``ProtocolError``
and whose ``MemberResult.error`` is a ``SignalbusError``) and ``errors`` (which re-exports these
and builds every other error) both import it, so neither imports the other the wrong way.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional


class SignalbusError(Exception):
    """Base class of every error this client raises.

    ``code`` is the bus's error code (CONTRACT §8) or a client-side one (``transport``,
    ``timeout``, ``closed``, ``spool_full``, ``ask_timeout``, ``protocol``); ``status`` the HTTP
    status when the answer came over HTTP; ``hint`` what the caller should do about it;
    ``details`` every other field of the bus's error object.
    """

    code: str = "error"
    hint: str = ""

    def __init__(
        self,
        message: str,
        *,
        code: Optional[str] = None,
        status: Optional[int] = None,
        hint: Optional[str] = None,
        details: Optional[Mapping[str, Any]] = None,
    ) -> None:
        if code is not None:
            self.code = code
        if hint is not None:
            self.hint = hint
        self.message = message
        # The §8 HTTP status of the code, whichever transport carried the answer.
        self.status = status if status is not None else HTTP_STATUS.get(self.code)
        self.details: dict[str, Any] = dict(details or {})
        super().__init__(self._text())

    def _text(self) -> str:
        text = f"{self.code}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text

    def with_hint(self, hint: str) -> "SignalbusError":
        """Replace the hint (the operation knows better than the class what to do); returns self."""
        self.hint = hint
        self.args = (self._text(),)
        return self


# CONTRACT §8 (docs/http.md): the HTTP status of each bus error code. An error that came over the
# WebSocket session carries the same status as over HTTP, so ``.status`` never depends on the
# transport.
HTTP_STATUS: dict[str, int] = {
    "invalid_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "unknown_recipient": 404,
    "recipient_unavailable": 409,
    "already_registered": 409,
    "invalid_transition": 409,
    "already_claimed": 409,
    "idempotency_conflict": 409,
    "unknown_group": 404,
    "payload_too_large": 413,
    "rate_limited": 429,
    "internal": 500,
    "unavailable": 503,
}


class ProtocolError(SignalbusError):
    code = "protocol"
    hint = "the bus answered something this client does not understand: check the versions"
