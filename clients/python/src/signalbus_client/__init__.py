"""signalbus-client: the Python client of signalbus (asyncio).

    from signalbus_client import Client, AdminClient

Layout, top to bottom (each module imports only modules below it): ``client`` (the ``Client``
facade) → ``replay`` (spooling and replay) → ``session`` (the session engine: transport, supervisor,
calls) → ``delivery`` (dedupe, dispatch, acks) → ``admin`` → ``http`` → ``spool``, ``types``,
``errors``.
"""

from .admin import AdminClient
from .client import Client, ConnectionCallback
from .errors import (
    AlreadyRegistered,
    AskTimeout,
    ClientClosed,
    Forbidden,
    InternalError,
    InvalidRequest,
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
    UnknownRecipient,
    UsageError,
)
from .replay import ReplayReport, SpoolExpired
from .spool import Spool, SpoolEntry
from .types import (
    Agent,
    Fact,
    FactPage,
    PluginState,
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
    "AdminClient", "Agent", "AlreadyRegistered", "AskTimeout", "Client", "ClientClosed", "ConnectionCallback", "Fact",
    "FactPage", "Forbidden", "InternalError", "InvalidRequest", "NotFound", "PayloadTooLarge",
    "PluginState", "ProtocolError", "RateLimited", "RecallResult", "RecipientUnavailable",
    "Registration", "Removal", "ReplayReport", "RequestTimeout", "SendOutcome", "SendResult", "Signal",
    "SignalPage", "SignalRow", "SignalbusError", "Spool", "SpoolEntry", "SpoolExpired",
    "SpoolFull", "Spooled", "TransportError", "Unauthorized", "Unavailable", "UnknownRecipient",
    "UsageError", "Welcome",
]
