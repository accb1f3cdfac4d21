"""Typed errors. Every error carries the bus's ``code`` and says what to do (``hint``)."""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional

# The base and ProtocolError live in the leaf error_base (types.py needs them); re-exported here.
from .error_base import HTTP_STATUS as HTTP_STATUS
from .error_base import ProtocolError as ProtocolError
from .error_base import SignalbusError as SignalbusError
from .types import Directive


class UsageError(ValueError):
    """A mistake in the calling code (``receive()`` on a client with an ``on_signal`` handler, a
    non-positive timeout, ...): a ``ValueError``, never sent to the bus, never retried. Not a
    ``SignalbusError``: fix the code."""


class InvalidRequest(SignalbusError):
    code = "invalid_request"
    hint = "fix the request: the message names the field; retrying it unchanged fails again"


class Unauthorized(SignalbusError):
    """The bus did not take the token: missing, wrong, rotated, revoked (``token revoked``),
    expired (``token expired``) or its agent removed; the message says which when the bus did."""

    code = "unauthorized"
    hint = "the token is missing, wrong, rotated, revoked, expired or removed: get a valid token (admin rotate or issue_token) and build a new client"


class Forbidden(SignalbusError):
    """The token may not make this call. ``scope`` names the scope it lacks (CONTRACT §17) when
    that is why; ``None`` for the other reasons (agent vs admin, another tenant, a plugin you do
    not own, a directive action that is not yours)."""

    code = "forbidden"
    hint = "this token may not do that (a scope it lacks: .scope; agent vs admin, another tenant, a plugin you do not own)"

    @property
    def scope(self) -> Optional[str]:
        value = self.details.get("scope")
        return value if isinstance(value, str) else None


class NotFound(SignalbusError):
    code = "not_found"
    hint = "no such resource visible to you; check the id or name"


class UnknownRecipient(SignalbusError):
    code = "unknown_recipient"
    hint = "the recipient is not registered in your tenant: register it (admin) or fix the name"


class RecipientUnavailable(SignalbusError):
    """A sync send bounced: the recipient was stale or offline. Nothing was queued, nothing will
    ever be delivered. ``recipient_state`` and ``signal_id`` (of the bounce) are set."""

    code = "recipient_unavailable"
    hint = "nothing was queued: send async to queue it, or retry later with a new dedupe_key"

    @property
    def recipient_state(self) -> Optional[str]:
        return self.details.get("recipient_state")

    @property
    def signal_id(self) -> Optional[str]:
        return self.details.get("signal_id")


class AlreadyRegistered(SignalbusError):
    code = "already_registered"
    hint = "the identity exists: rotate its token instead of registering it again"


class UnknownGroup(SignalbusError):
    code = "unknown_group"
    hint = "no such group in your tenant: create it (admin create_group) or fix the name"


def _directive_of(obj: Any) -> Optional[Directive]:
    return Directive.from_json(obj) if isinstance(obj, Mapping) else None


class InvalidTransition(SignalbusError):
    """The directive's state does not allow the action (completing a completed one, starting a
    canceled one, ...). ``directive`` is the directive as it is now."""

    code = "invalid_transition"
    hint = "the directive moved on: read .directive (its status) and act on that"

    @property
    def directive(self) -> "Optional[Directive]":
        return _directive_of(self.details.get("directive"))


class AlreadyClaimed(SignalbusError):
    """Another member of the group started (claimed) the directive first. ``claimed_by`` names it."""

    code = "already_claimed"
    hint = "another member has it: leave it to them"

    @property
    def claimed_by(self) -> Optional[str]:
        return self.details.get("claimed_by")


class IdempotencyConflict(SignalbusError):
    """The ``idempotency_key`` already names one of your directives with another ``to``,
    ``type`` or ``params``; ``directive_id`` is that directive's."""

    code = "idempotency_conflict"
    hint = "the idempotency_key is taken by another directive: use a fresh key, or repeat that directive's request"

    @property
    def directive_id(self) -> Optional[str]:
        return self.details.get("directive_id")


class PayloadTooLarge(SignalbusError):
    code = "payload_too_large"
    hint = "payloads are at most 64 KiB encoded, plugin states 1 MiB: send less, or a reference to it"


class RateLimited(SignalbusError):
    code = "rate_limited"
    hint = "over the per-identity quota: nothing was recorded; retry after retry_after seconds"

    @property
    def retry_after(self) -> Optional[float]:
        value = self.details.get("retry_after_ms")
        if isinstance(value, (int, float)):
            return float(value) / 1000
        match = re.search(r"(\d+(?:\.\d+)?)\s*(ms|s)\b", self.message)
        if match:
            n = float(match.group(1))
            return n / 1000 if match.group(2) == "ms" else n
        return None


class Unavailable(SignalbusError):
    code = "unavailable"
    hint = "the bus took nothing: retry later"


class InternalError(SignalbusError):
    code = "internal"
    hint = "the bus failed; retry later and report it if it persists"


# The hint of a TransportError raised before any byte reached the bus (no connection could be
# made, or no session was open for an ask): unlike a dropped exchange, its outcome is known.
NOTHING_SENT = "nothing was sent: retry once the bus is reachable"


class TransportError(SignalbusError):
    """The bus could not be reached, or the connection dropped before an answer came. For a send
    the outcome is unknown: retry with the same ``dedupe_key`` (kept in ``details``), which
    answers the original signal if it was stored (the send's hint says so)."""

    code = "transport"
    hint = "the connection failed before an answer came: repeat the call once the bus is reachable"

    @property
    def dedupe_key(self) -> Optional[str]:
        return self.details.get("dedupe_key")


class RequestTimeout(TransportError, TimeoutError):
    """No answer (or no signal, no session) in time. Also a ``TimeoutError``."""

    code = "timeout"
    hint = "no answer in time: repeat the call once the bus answers"


# The hints of a send's failures: a send carries a dedupe_key, and retrying with it is safe.
SEND_HINTS: dict[str, str] = {
    "transport": "the outcome is unknown: retry with the same dedupe_key once the bus is reachable",
    "timeout": "no answer in time, the outcome is unknown: retry with the same dedupe_key",
    "unavailable": "the bus took nothing: retry later with the same dedupe_key (or give the client a spool_dir)",
    "internal": "the bus failed; retry later with the same dedupe_key and report it if it persists",
}


def for_send(exc: SignalbusError) -> SignalbusError:
    """``exc`` with the send's hint (retry with the same dedupe_key) when its hint is the class's
    generic one; a hint an operation set (``nothing was sent``) is kept."""
    hint = SEND_HINTS.get(exc.code)
    if hint is not None and exc.hint == type(exc).hint:
        exc.with_hint(hint)
    return exc


class ClientClosed(SignalbusError):
    code = "closed"
    hint = "the client was closed: build a new one"


class SpoolFull(SignalbusError):
    code = "spool_full"
    hint = "the send is larger than the whole spool (max_bytes): raise the cap or send less"


class AskTimeout(SignalbusError):
    """No reply carrying the ask's correlation_id arrived in time. The question was sent
    (``signal_id``, ``correlation_id`` in details); a late reply goes to the signal handler."""

    code = "ask_timeout"
    hint = "no reply in time: the question was sent; wait longer, or recall it (signal_id)"

    @property
    def signal_id(self) -> Optional[str]:
        return self.details.get("signal_id")

    @property
    def correlation_id(self) -> Optional[str]:
        return self.details.get("correlation_id")


class DirectiveEnded(SignalbusError):
    """Base of what ``run_directive`` raises when the directive ended without a result:
    ``DirectiveFailed``, ``DirectiveRejected``, ``DirectiveExpired``, ``DirectiveCanceled``.
    ``directive`` is the directive as it ended (``failure``, ``reason``, ``declined_by``, ...)."""

    code = "directive_ended"

    def __init__(self, message: str, *, directive: "Directive", **kwargs: Any) -> None:
        self.directive = directive
        details = {"directive_id": directive.directive_id, **dict(kwargs.pop("details", None) or {})}
        super().__init__(message, details=details, **kwargs)

    @property
    def directive_id(self) -> str:
        return self.directive.directive_id


class DirectiveFailed(DirectiveEnded):
    """The worker failed the directive: ``directive.failure`` has its ``code`` and ``message``."""

    code = "directive_failed"
    hint = "the worker reported a failure: see .directive.failure"


class DirectiveRejected(DirectiveEnded):
    """The assignee (every member, for a group) declined the directive: ``directive.reason``."""

    code = "directive_rejected"
    hint = "the assignee declined it: see .directive.reason and .directive.declined_by"


class DirectiveExpired(DirectiveEnded):
    """The directive was still open at its deadline: the bus expired it."""

    code = "directive_expired"
    hint = "nobody finished it before its deadline: is a worker running for its type? give a longer deadline_seconds"


class DirectiveCanceled(DirectiveEnded):
    """The issuer canceled the directive (``directive.reason``)."""

    code = "directive_canceled"
    hint = "the directive was canceled: see .directive.reason"


class DirectiveTimeout(SignalbusError, TimeoutError):
    """``run_directive`` waited ``timeout`` seconds and the directive had not ended. It is left as
    it is (still open: cancel it with ``cancel_directive`` if it no longer matters); ``directive``
    is its state when the wait gave up. Also a ``TimeoutError``."""

    code = "directive_timeout"
    hint = "the directive is still open: wait longer (get_directive(id, wait=...)) or cancel it"

    def __init__(self, message: str, *, directive: "Directive", **kwargs: Any) -> None:
        self.directive = directive
        details = {"directive_id": directive.directive_id, **dict(kwargs.pop("details", None) or {})}
        super().__init__(message, details=details, **kwargs)

    @property
    def directive_id(self) -> str:
        return self.directive.directive_id


_BY_CODE: dict[str, type[SignalbusError]] = {
    cls.code: cls
    for cls in (
        InvalidRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        UnknownRecipient,
        RecipientUnavailable,
        AlreadyRegistered,
        UnknownGroup,
        InvalidTransition,
        AlreadyClaimed,
        IdempotencyConflict,
        PayloadTooLarge,
        RateLimited,
        Unavailable,
        InternalError,
    )
}

_BY_STATUS: dict[int, type[SignalbusError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    413: PayloadTooLarge,
    429: RateLimited,
    503: Unavailable,
}


def error_from_body(body: Any, status: Optional[int] = None) -> SignalbusError:
    """Build the typed error of a bus error object (``{"code","message",...}``) or error body
    (``{"error":{...}}``)."""
    obj = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else body
    if not isinstance(obj, dict):
        obj = {}
    code = obj.get("code") if isinstance(obj.get("code"), str) else None
    message = obj.get("message") if isinstance(obj.get("message"), str) else None
    details = {k: v for k, v in obj.items() if k not in ("code", "message")}
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status or 0)
    if cls is None:
        cls = InternalError if (status or 0) >= 500 else SignalbusError
    if message is None:
        message = f"the bus answered {status}" if status else "the bus answered an error"
    return cls(message, code=code or cls.code, status=status, details=details)


# Codes after which a spooled send is settled (the bus answered it definitively): the entry is
# deleted. Anything else (unavailable, rate_limited, internal, unauthorized, transport) keeps it.
DEFINITIVE_CODES = frozenset(
    {
        "invalid_request",
        "forbidden",
        "not_found",
        "unknown_recipient",
        "unknown_group",
        "recipient_unavailable",
        "payload_too_large",
    }
)
