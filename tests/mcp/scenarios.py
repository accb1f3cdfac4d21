"""MCP scenarios against a live signalbus, driven by the official MCP Python SDK (PyPI `mcp`).

Run by the Rust tests (`testkit::mcp::run_scenario`) as `python scenarios.py NAME 'ARGS-JSON'`;
ARGS carries the bus URL, the admin token and whatever the Rust side set up. Each scenario
asserts and exits non-zero with a message on the first surprise. Bus state is checked through
the plain HTTP API (stdlib urllib), never through the code under test.

Deliberately uses the SDK's ordinary entry points (`Client` in its default `auto` mode, the
streamable-HTTP and stdio transports): a client no one here wrote.
"""

import asyncio
import json
import sys
import urllib.error
import urllib.request
import uuid

import httpx2
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

RODE = []  # ids of every signal that rode along on a tool result (not check_inbox's own)
TOOLS = ["send_signal", "recall_signal", "check_inbox", "ack_signals",
         "get_signal", "list_agents", "record_fact", "plugin_state",
         "create_directive", "get_directive", "list_directives", "update_directive", "list_groups",
         "list_signals"]


def check(cond, what, *context):
    if not cond:
        raise AssertionError(what + "".join(f"\n  {json.dumps(c, default=str)}" for c in context))


class Bus:
    def __init__(self, args):
        self.url = args["url"]
        self.admin = args["admin"]

    def http(self, method, path, token, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def register(self, identity):
        status, body = self.http("POST", "/v1/agents", self.admin, {"identity": identity})
        check(status == 200, f"register {identity}", status, body)
        return body["token"]

    def row(self, token, signal_id):
        status, body = self.http("GET", f"/v1/signals/{signal_id}", token)
        check(status == 200, "signal row", status, body)
        return body

    def state_of(self, token, identity):
        _, body = self.http("GET", "/v1/agents", token)
        return next(a for a in body["agents"] if a["identity"] == identity)

    def mcp(self, token, **kw):
        """An MCP client on /mcp with the agent's bearer token."""
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30, read=300))
        return Client(streamable_http_client(self.url + "/mcp", http_client=http), **kw)


async def eventually(what, probe, *context):
    for _ in range(100):
        if probe():
            return
        await asyncio.sleep(0.1)
    check(False, what, *context)


async def call(client, name, args=None):
    """A tool call: (is_error, structuredContent), checking the text block carries the same JSON."""
    r = await client.call_tool(name, args or {})
    RODE.extend(s["id"] for s in (r.structured_content or {}).get("signals", []) if name != "check_inbox")
    check(len(r.content) == 1 and r.content[0].type == "text", f"{name}: one text block", str(r))
    check(json.loads(r.content[0].text) == r.structured_content, f"{name}: text == structuredContent", str(r))
    return r.is_error, r.structured_content


async def ok(client, name, args=None):
    err, body = await call(client, name, args)
    check(not err, f"{name} failed", args, body)
    return body


async def fails(client, name, args, code):
    err, body = await call(client, name, args)
    check(err and body["error"]["code"] == code, f"{name} should fail with {code}", args, body)
    return body["error"]


# ---------------------------------------------------------------- /mcp (Streamable HTTP)

async def tools(bus, args):
    token = bus.register("alice")
    async with bus.mcp(token) as c:
        listed = (await c.list_tools()).tools
        check([t.name for t in listed] == TOOLS, "the fourteen tools, in order", [t.name for t in listed])
        required = {"send_signal": ["to", "type"], "recall_signal": [], "check_inbox": [],
                    "ack_signals": ["signal_ids"], "get_signal": ["signal_id"], "list_agents": [],
                    "record_fact": ["plugin", "fact_type", "state"], "plugin_state": ["plugin"],
                    "create_directive": ["to", "type", "idempotency_key"], "get_directive": ["directive_id"],
                    "list_directives": [], "update_directive": ["directive_id", "action"], "list_groups": [],
                    "list_signals": []}
        for t in listed:
            s = t.input_schema
            check(s["type"] == "object" and s["required"] == required[t.name], f"{t.name} schema", s)
            check(len(t.description) > 80, f"{t.name} has a description for the model", t.description)
            for field, spec in s["properties"].items():
                check(spec.get("description"), f"{t.name}.{field} is described", spec)
        inbox = next(t for t in listed if t.name == "check_inbox").input_schema["properties"]
        check(inbox["wait_seconds"]["maximum"] == 50, "check_inbox waits up to 50 s", inbox)
        send = next(t for t in listed if t.name == "send_signal").input_schema["properties"]
        check(send["delivery_class"]["enum"] == ["sync", "async"], "delivery classes", send)
        check(send["deliver_after_seconds"]["maximum"] == 2592000 and send["deliver_at"]["format"] == "date-time",
              "a send may be scheduled", send)
        # The session is a bus session: piggyback, shim, available.
        me = bus.state_of(token, "alice")
        check(me["state"] == "available" and me["live_sessions"] == 1, "the mcp session is live", me)


async def sends(bus, args):
    alice = args["alice"]
    carol = args["carol"]  # a WebSocket agent the Rust side holds open
    bus.register("bob")
    async with bus.mcp(alice) as c:
        # A signal the WebSocket agent sent before this session existed rides on its first call.
        body = await ok(c, "list_agents")
        rode = body.get("signals", [])
        check([s["type"] for s in rode] == ["FromWs"], "the ws agent's signal rides along", body)
        row = bus.row(alice, rode[0]["id"])
        check(row["delivered_via"] == "piggyback" and row["resolved_to_session"], "delivered by piggyback", row)

        e = await fails(c, "send_signal", {"to": "bob", "type": "Question", "delivery_class": "sync"},
                        "recipient_unavailable")
        check(e["recipient_state"] == "not_available_offline" and e["signal_id"], "bounce details", e)
        q = await ok(c, "send_signal", {"to": "bob", "type": "StatusUpdate", "payload": {"n": 1}})
        check(q["queued"] is True and q["delivered"] is False and q["publish_path"] == "queued_offline", "async", q)
        # Later, not now (CONTRACT §16): scheduled, recallable until delivered; never a sync one.
        later = await ok(c, "send_signal", {"to": "bob", "type": "ReviewRequested", "payload": {"pr": 7},
                                            "deliver_after_seconds": 3600})
        check(later["publish_path"] == "scheduled" and later["queued"] is True and later["deliver_at"], "scheduled",
              later)
        e = await fails(c, "send_signal", {"to": "bob", "type": "Question", "deliver_after_seconds": 60},
                        "invalid_request")
        check("sync" in e["message"], "a sync signal is not scheduled", e)
        r = await ok(c, "recall_signal", {"signal_id": later["signal_id"]})
        check(r == {"outcome": "recalled"}, "a scheduled signal is recalled before it is due", r)
        # To the WebSocket agent: pushed, and delivered: true only once the stream holds it.
        d = await ok(c, "send_signal", {"to": "carol", "type": "Question", "dedupe_key": "q-1",
                                        "payload": {"ask": "ready?"}})
        check(d["delivered"] is True and d["publish_path"] == "pushed_to_ws", "sync to ws", d)
        again = await ok(c, "send_signal", {"to": "carol", "type": "Question", "dedupe_key": "q-1",
                                            "payload": {"ask": "ready?"}})
        check(again["signal_id"] == d["signal_id"], "dedupe answers the original", again, d)
        check(bus.row(carol, d["signal_id"])["delivered_via"] == "ws_push", "pushed", d)
        # Recall: outcomes, not errors.
        r = await ok(c, "recall_signal", {"signal_id": q["signal_id"]})
        check(r == {"outcome": "recalled"}, "recalled", r)
        r = await ok(c, "recall_signal", {"signal_id": q["signal_id"]})
        check(r == {"outcome": "recalled"}, "recalled again", r)
        r = await ok(c, "recall_signal", {"signal_id": d["signal_id"]})
        check(r == {"outcome": "already_delivered"}, "too late", r)
        for unknown in [str(uuid.uuid4()), "not-a-uuid"]:
            r = await ok(c, "recall_signal", {"signal_id": unknown})
            check(r == {"outcome": "not_found"}, "not found", r)
        # Plugin facts.
        f = await ok(c, "record_fact", {"plugin": "alice/notes", "fact_type": "t", "state": {"k": 1, "token": "x"}})
        check(f["seq"] == 1 and f["redacted"] == ["token"], "fact recorded, secret redacted", f)
        s = await ok(c, "plugin_state", {"plugin": "alice/notes"})
        check(s["state"] == {"k": 1, "token": "[REDACTED]"} and s["seq"] == 1, "state", s)
        await fails(c, "record_fact", {"plugin": "bob", "fact_type": "t", "state": {}}, "forbidden")
        g = await ok(c, "get_signal", {"signal_id": d["signal_id"]})
        check(g["to_identity"] == "carol" and g["delivered_at"], "row", g)
        await fails(c, "get_signal", {"signal_id": str(uuid.uuid4())}, "not_found")


async def piggyback(bus, args):
    alice, bob = bus.register("alice"), bus.register("bob")
    async with bus.mcp(alice) as a:
        async with bus.mcp(bob) as b:
            sent = []
            for kind, cls in [("StatusUpdate", "async"), ("Blocker", "sync")]:
                s = await ok(a, "send_signal", {"to": "bob", "type": kind, "delivery_class": cls})
                check(s["queued"] and s["publish_path"] == "buffered_for_piggyback"
                      and s["recipient_state"] == "available" and s["resolved_to_session"], "buffered", s)
                sent.append(s["signal_id"])
            peek = await ok(b, "check_inbox")
            check([x["id"] for x in peek["signals"]] == sent[::-1], "pending, priority first", peek)
            body = await ok(b, "list_agents")
            check([x["id"] for x in body.get("signals", [])] == sent[::-1], "both ride along", body)
            for sid in sent:
                row = bus.row(bob, sid)
                check(row["delivered_via"] == "piggyback" and row["acked_at"] is None, "piggyback delivery", row)
            body = await ok(b, "list_agents")
            check("signals" not in body, "handed out once", body)
            acked = await ok(b, "ack_signals", {"signal_ids": sent[:1]})
            check(acked["acked"] == 1, "acked", acked)
            check(bus.row(bob, sent[0])["acked_at"], "ack recorded", sent)
        # bob's session is gone (DELETE): what it never acked comes back, redelivered.
        await eventually("DELETE closed bob's session",
                         lambda: bus.state_of(alice, "bob")["state"] == "not_available_offline")
        async with bus.mcp(bob) as b:
            drained = await ok(b, "check_inbox", {"drain": True})
            check([(x["id"], x["redelivered"]) for x in drained["signals"]] == [(sent[1], True)], "redelivered",
                  drained)
            check(bus.row(bob, sent[1])["delivered_via"] == "inbox", "drained", sent)
            await ok(b, "ack_signals", {"signal_ids": [sent[1]]})


async def announce(bus, args):
    alice, bob = bus.register("alice"), bus.register("bob")
    heard = asyncio.Queue()

    async def on_log(params):
        await heard.put(params)

    async with bus.mcp(bob, logging_callback=on_log) as b:
        await ok(b, "list_agents")  # its GET stream is open once initialized
        await asyncio.sleep(0.5)
        async with bus.mcp(alice) as a:
            s = await ok(a, "send_signal", {"to": "bob", "type": "Question", "payload": {"q": "lunch?"}})
        note = await asyncio.wait_for(heard.get(), 10)
        check(note.logger == "signalbus" and note.level == "notice", "a notice", note.model_dump())
        check(note.data["event"] == "signal_pending" and note.data["signal_id"] == s["signal_id"]
              and note.data["from"] == "alice", "announces the signal", note.data)
        check(bus.row(bob, s["signal_id"])["delivered_at"] is None, "announced, not delivered", s)
        got = await ok(b, "check_inbox", {"drain": True})
        check([x["payload"] for x in got["signals"]] == [{"q": "lunch?"}], "then drained", got)


async def waiting(bus, args):
    """check_inbox with wait_seconds is answered when a signal arrives (well before its wait), or
    empty after it; list_signals reads one conversation, the caller's own signals, oldest first."""
    alice, bob, carol = bus.register("alice"), bus.register("bob"), bus.register("carol")
    loop = asyncio.get_running_loop()
    async with bus.mcp(bob) as b:
        started = loop.time()
        waiting = asyncio.ensure_future(ok(b, "check_inbox", {"drain": True, "wait_seconds": 30}))
        await asyncio.sleep(0.5)
        check(not waiting.done(), "nothing pending: it waits", waiting)
        _, s = bus.http("POST", "/v1/signals", alice, {"to": "bob", "type": "Question", "delivery_class": "async",
                                                        "correlation_id": "thread-1", "payload": {"q": "lunch?"}})
        got = await asyncio.wait_for(waiting, 20)
        check([x["id"] for x in got["signals"]] == [s["signal_id"]], "answered with the signal", got, s)
        check(loop.time() - started < 15, "answered when it came, not at the end of the wait", got)
        check(bus.row(bob, s["signal_id"])["delivered_via"] == "inbox", "drained", s)
        started = loop.time()
        empty = await ok(b, "check_inbox", {"wait_seconds": 1})
        check(empty["signals"] == [] and loop.time() - started >= 1, "empty after the wait", empty)
        e = await fails(b, "check_inbox", {"wait_seconds": 51}, "invalid_request")
        check(e["message"] == "wait_seconds must be a whole number from 0 to 50", "names the field", e)

        r = await ok(b, "send_signal", {"to": "alice", "type": "StatusUpdate", "correlation_id": "thread-1",
                                        "payload": {"a": "yes"}})
        bus.http("POST", "/v1/signals", carol, {"to": "alice", "type": "StatusUpdate", "correlation_id": "thread-1"})
        bus.http("POST", "/v1/signals", alice, {"to": "bob", "type": "StatusUpdate", "correlation_id": "thread-2"})
        thread = await ok(b, "list_signals", {"correlation_id": "thread-1"})
        check([x["id"] for x in thread["signals"]] == [s["signal_id"], r["signal_id"]]
              and thread["next_cursor"] is None, "bob's side of the thread, oldest first", thread)
        check([x["from_identity"] for x in thread["signals"]] == ["alice", "bob"], "both roles", thread)
        first = await ok(b, "list_signals", {"correlation_id": "thread-1", "limit": 1})
        rest = await ok(b, "list_signals", {"correlation_id": "thread-1", "limit": 1, "cursor": first["next_cursor"]})
        check([x["id"] for x in first["signals"] + rest["signals"]] == [s["signal_id"], r["signal_id"]], "paged",
              first, rest)
        sent = await ok(b, "list_signals", {"correlation_id": "thread-1", "role": "sent"})
        check([x["id"] for x in sent["signals"]] == [r["signal_id"]], "role sent", sent)
        newest = await ok(b, "list_signals", {})
        check(newest["signals"][0]["correlation_id"] == "thread-2", "without a correlation_id: newest first", newest)
        e = await fails(b, "list_signals", {"status": "lost"}, "invalid_request")
        check("status" in e["message"], "names the field", e)


async def bad_input(bus, args):
    token = bus.register("alice")
    bus.register("bob")
    async with bus.mcp(token) as c:
        try:
            await c.call_tool("send_signals", {"to": "bob"})
            check(False, "an unknown tool must fail")
        except MCPError as e:
            check("unknown tool" in str(e) and "send_signal" in str(e), "names the tools", str(e))
        e = await fails(c, "send_signal", {"type": "X"}, "invalid_request")
        check(e["message"] == "to is required", "names the field", e)
        e = await fails(c, "send_signal", {"to": "bob", "type": "X", "ttl_seconds": "soon"}, "invalid_request")
        check("ttl_seconds" in e["message"], "names the field", e)
        e = await fails(c, "send_signal", {"to": "bob", "type": "X", "from": "eve"}, "invalid_request")
        e = await fails(c, "ack_signals", {"signal_ids": "x"}, "invalid_request")
        check("signal_ids" in e["message"], "names the field", e)
        e = await fails(c, "check_inbox", {"drain": "yes"}, "invalid_request")
        await fails(c, "send_signal", {"to": "nobody", "type": "X"}, "unknown_recipient")
        big = {"to": "bob", "type": "X", "payload": {"blob": "x" * (70 * 1024)}}
        await fails(c, "send_signal", big, "payload_too_large")
        # Still the same session, still working.
        s = await ok(c, "send_signal", {"to": "bob", "type": "X"})
        check(s["queued"], "the session stays up", s)
    # A bad token never gets a session.
    try:
        async with bus.mcp("sb_not_a_token") as c:
            await c.list_tools()
        check(False, "a bad token must be refused")
    except Exception as e:  # the SDK reports the 401 as it sees fit
        check("401" in repr(e) or "nauthorized" in repr(e) or isinstance(e, (MCPError, ExceptionGroup)),
              "refused", repr(e))


# ---------------------------------------------------------------- `signalbus mcp` (stdio)

async def stdio(bus, args):
    alice, bob = bus.register("alice"), bus.register("bob")
    server = StdioServerParameters(command=args["bin"], args=["mcp", "--url", bus.url, "--token", alice])
    heard = asyncio.Queue()

    async def on_log(params):
        await heard.put(params)

    # A signal waiting before the shim starts reaches it by its startup drain.
    _, early = bus.http("POST", "/v1/signals", bob, {"to": "alice", "type": "TaskAssigned", "payload": {"n": 0}})
    async with Client(server, logging_callback=on_log) as c:
        listed = [t.name for t in (await c.list_tools()).tools]
        check(listed == TOOLS, "the same fourteen tools", listed)
        q = await ok(c, "send_signal", {"to": "bob", "type": "StatusUpdate"})
        check(q["queued"] and q["publish_path"] == "queued_offline", "async to an offline agent", q)
        await fails(c, "send_signal", {"to": "bob", "type": "Blocker"}, "recipient_unavailable")
        body = await ok(c, "list_agents")
        me = next(a for a in body["agents"] if a["identity"] == "alice")
        check(me["state"] == "available", "the shim holds a session", me)
        for _ in range(50):  # pushed by the startup drain, a moment after the session opened
            if early["signal_id"] in RODE:
                break
            await ok(c, "list_agents")
            await asyncio.sleep(0.1)
        check(early["signal_id"] in RODE, "the waiting signal rides along", RODE)
        # A signal pushed while the agent waits is announced, then handed over and acked.
        _, live = bus.http("POST", "/v1/signals", bob, {"to": "alice", "type": "Question", "payload": {"q": 1}})
        check(live["delivered"] is True and live["publish_path"] == "pushed_to_ws", "pushed to the shim", live)
        # The waiting signal may have been announced too, as its push arrived.
        note = await asyncio.wait_for(heard.get(), 10)
        while note.data["signal_id"] == early["signal_id"]:
            note = await asyncio.wait_for(heard.get(), 10)
        check(note.data["signal_id"] == live["signal_id"] and note.data["from"] == "bob", "announced over stdio",
              note.data)
        body = await ok(c, "get_signal", {"signal_id": live["signal_id"]})
        check(RODE.count(live["signal_id"]) == 1 and body.get("signals", [{}])[0].get("id") == live["signal_id"],
              "handed over, once", body, RODE)
        check(body["delivered_via"] == "ws_push", "the row", body)
        for sid in [live["signal_id"], early["signal_id"]]:
            await eventually("acked once handed over", lambda: bus.row(alice, sid)["acked_at"], sid)
        try:
            await c.call_tool("nope", {})
            check(False, "an unknown tool must fail")
        except MCPError as e:
            check("unknown tool" in str(e), "names it", str(e))
        e = await fails(c, "get_signal", {}, "invalid_request")
        check(e["message"] == "signal_id is required", "names the field", e)
        r = await ok(c, "recall_signal", {"signal_id": q["signal_id"]})
        check(r == {"outcome": "recalled"}, "recall through the shim", r)
        await ok(c, "check_inbox", {"drain": True})
        # A wait through the shim ends when a signal is pushed to its session.
        started = asyncio.get_running_loop().time()
        waiting = asyncio.ensure_future(ok(c, "check_inbox", {"wait_seconds": 30}))
        await asyncio.sleep(0.5)
        _, w = bus.http("POST", "/v1/signals", bob, {"to": "alice", "type": "StatusUpdate", "correlation_id": "c-1"})
        got = await asyncio.wait_for(waiting, 20)
        check(w["signal_id"] in [x["id"] for x in got["signals"]], "the wait ends with the signal", got, w)
        check(asyncio.get_running_loop().time() - started < 15, "when it came", got)
        thread = await ok(c, "list_signals", {"correlation_id": "c-1"})
        check([x["id"] for x in thread["signals"]] == [w["signal_id"]], "a conversation through the shim", thread)
    await eventually("the shim's session closed with it",
                     lambda: bus.state_of(bob, "alice")["state"] == "not_available_offline")


async def team(bus, args):
    """Directives and groups through the tools: alice hands work to bob and waits for it with
    get_directive(wait_seconds); bob finds it with list_directives and completes it; a send to a
    group answers per member and is recalled by its fanout_id."""
    alice, bob = bus.register("alice"), bus.register("bob")
    bus.register("carol")
    for path in ["/v1/groups/crew", "/v1/groups/crew/members/bob", "/v1/groups/crew/members/carol"]:
        status, body = bus.http("PUT", path, bus.admin, {} if path.endswith("crew") else None)
        check(status in (200, 201), path, status, body)
    async with bus.mcp(alice) as a, bus.mcp(bob) as b:
        d = await ok(a, "create_directive", {"to": "bob", "type": "review.code", "params": {"pr": 7},
                                             "idempotency_key": "pr-7"})
        check(d["status"] == "requested" and d["assignee"] == "bob", "created", d)
        again = await ok(a, "create_directive", {"to": "bob", "type": "review.code", "params": {"pr": 7},
                                                 "idempotency_key": "pr-7"})
        check(again["directive_id"] == d["directive_id"], "the same key is the same directive", again)
        todo = await ok(b, "list_directives", {"role": "assigned", "status": "requested"})
        check([x["directive_id"] for x in todo["directives"]] == [d["directive_id"]], "bob's work", todo)
        e = await fails(b, "update_directive", {"directive_id": d["directive_id"], "action": "cancel"}, "forbidden")
        await ok(b, "update_directive", {"directive_id": d["directive_id"], "action": "start"})
        waiting = asyncio.ensure_future(ok(a, "get_directive", {"directive_id": d["directive_id"], "wait_seconds": 30}))
        await asyncio.sleep(0.3)
        done = await ok(b, "update_directive", {"directive_id": d["directive_id"], "action": "complete",
                                                "result": {"approved": True}})
        check(done["status"] == "completed", "completed", done)
        seen = await asyncio.wait_for(waiting, 20)
        check(seen["status"] == "completed" and seen["result"] == {"approved": True}, "the waiter saw the end", seen)
        e = await fails(b, "update_directive", {"directive_id": d["directive_id"], "action": "complete",
                                                "result": {}}, "invalid_transition")
        check(e["directive"]["status"] == "completed", "the error carries the directive", e)
        groups = await ok(a, "list_groups")
        check(groups["groups"][0]["members"] == ["bob", "carol"], "the crew", groups)
        sent = await ok(a, "send_signal", {"to": "@crew", "type": "StatusUpdate", "payload": {"n": 1}})
        check([r["to"] for r in sent["results"]] == ["bob", "carol"], "one entry per member", sent)
        back = await ok(a, "recall_signal", {"fanout_id": sent["fanout_id"]})
        check(len(back["results"]) == 2, "one outcome per signal", back)
        await fails(a, "send_signal", {"to": "@nobody", "type": "StatusUpdate"}, "unknown_group")


SCENARIOS = {f.__name__: f for f in [tools, sends, piggyback, announce, waiting, bad_input, stdio, team]}

if __name__ == "__main__":
    name, raw = sys.argv[1], sys.argv[2]
    asyncio.run(SCENARIOS[name](Bus(json.loads(raw)), json.loads(raw)))
    print(f"scenario {name}: ok")
