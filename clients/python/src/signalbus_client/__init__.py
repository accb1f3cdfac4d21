"""signalbus-client: the Python client of signalbus (asyncio).

    from signalbus_client import Client, AdminClient

Layout, top to bottom (each module imports only modules below it): ``client`` (the ``Client``
facade) → ``directives`` (directive calls, ``run_directive``'s waits, ``on_directive`` workers),
``replay`` (spooling and replay) → ``session`` (the session engine: transport, supervisor,
calls) → ``delivery`` (dedupe, routes, dispatch, acks) → ``admin`` → ``http`` → ``spool`` →
``errors`` → ``tokens`` (the token calls' answers, scopes) → ``types`` → ``error_base``
(``SignalbusError``, ``ProtocolError``).
"""

from .admin import AdminClient
from .client import Client, ConnectionCallback
from .directives import DirectiveHandler, ProgressReporter
from .errors import (
    AlreadyClaimed,
    AlreadyRegistered,
    AskTimeout,
    ClientClosed,
    DirectiveCanceled,
    DirectiveEnded,
    DirectiveExpired,
    DirectiveFailed,
    DirectiveRejected,
    DirectiveTimeout,
    Forbidden,
    IdempotencyConflict,
    InternalError,
    InvalidRequest,
    InvalidTransition,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    RateLimited,
    RecipientUnavailable,
    RequestTimeout,
    SignalbusError,
    SpoolFull,
    TransportError,
    Unauthorized,
    Unavailable,
    UnknownGroup,
    UnknownRecipient,
    UsageError,
)
from .replay import ReplayReport, SpoolExpired
from .spool import Spool, SpoolEntry
from .tokens import SCOPES, AdminToken, AdminTokenInfo, IssuedToken, Scope, TokenInfo
from .types import (
    Agent,
    Directive,
    DirectiveFailure,
    DirectivePage,
    DirectiveProgress,
    ExpireCandidate,
    ExpirePreview,
    ExpireResult,
    Fact,
    FactPage,
    FanoutResult,
    Group,
    GroupMember,
    MemberResult,
    PluginState,
    RecallEntry,
    RecallResult,
    Registration,
    Removal,
    SendOutcome,
    SendResult,
    Signal,
    SignalPage,
    SignalRow,
    Spooled,
    Welcome,
)

__version__ = "0.1.0"

__all__ = [
    "AdminClient", "AdminToken", "AdminTokenInfo", "Agent", "AlreadyClaimed", "AlreadyRegistered", "AskTimeout", "Client",
    "ClientClosed", "ConnectionCallback", "Directive", "DirectiveCanceled", "DirectiveEnded",
    "DirectiveExpired", "DirectiveFailed", "DirectiveFailure", "DirectiveHandler", "DirectivePage",
    "DirectiveProgress", "DirectiveRejected", "DirectiveTimeout", "ExpireCandidate", "ExpirePreview",
    "ExpireResult", "Fact", "FactPage",
    "IssuedToken", "SCOPES", "Scope", "TokenInfo",
    "FanoutResult", "Forbidden", "Group", "GroupMember", "IdempotencyConflict", "InternalError",
    "InvalidRequest", "InvalidTransition", "MemberResult", "NotFound", "PayloadTooLarge",
    "PluginState", "ProgressReporter", "ProtocolError", "RateLimited", "RecallEntry",
    "RecallResult", "RecipientUnavailable", "Registration", "Removal", "ReplayReport",
    "RequestTimeout", "SendOutcome", "SendResult", "Signal", "SignalPage", "SignalRow",
    "SignalbusError", "Spool", "SpoolEntry", "SpoolExpired", "SpoolFull", "Spooled",
    "TransportError", "Unauthorized", "Unavailable", "UnknownGroup", "UnknownRecipient",
    "UsageError", "Welcome",
]
