"""Typed answers of the token calls (CONTRACT §17): an agent's issued tokens and the tenant admin
tokens, and the scopes a token may hold.

Deliberately only shapes, read from the bus's JSON: which scopes a call needs, who may issue what
and when a token stops working are the bus's decisions (``AdminClient`` makes the calls).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Mapping, Optional

from .types import _req, parse_time

Scope = Literal["send", "receive", "recall", "facts", "directives", "read"]

# CONTRACT §17, in the order the bus lists them: a token issued without ``scopes`` holds all six.
SCOPES: tuple[Scope, ...] = ("send", "receive", "recall", "facts", "directives", "read")

# The id under which an agent's token list shows its registration token (rotated, never revoked).
REGISTRATION = "registration"


@dataclass(frozen=True)
class IssuedToken:
    """``AdminClient.issue_token`` answer: the new token's ``token`` (its secret, shown this once)
    and what it may do. ``expires_at`` is ``None`` for a token that does not expire."""

    token_id: str
    token: str
    scopes: list[str]
    expires_at: Optional[datetime]
    label: Optional[str]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __repr__(self) -> str:  # never print a secret by accident
        return f"IssuedToken(token_id={self.token_id!r}, scopes={self.scopes!r}, expires_at={self.expires_at!r}, label={self.label!r})"

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "IssuedToken":
        return cls(
            token_id=_req(obj, "token_id"),
            token=_req(obj, "token"),
            scopes=list(obj.get("scopes") or []),
            expires_at=parse_time(obj.get("expires_at")),
            label=obj.get("label"),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class TokenInfo:
    """One of an agent's tokens as ``AdminClient.tokens`` lists it (never its secret). The
    registration token is ``token_id == "registration"``; ``expired`` is true once
    ``expires_at`` has passed (it is listed until revoked)."""

    token_id: str
    label: Optional[str]
    scopes: list[str]
    expires_at: Optional[datetime]
    issued_at: Optional[datetime]
    expired: bool
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_registration(self) -> bool:
        return self.token_id == REGISTRATION

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "TokenInfo":
        return cls(
            token_id=_req(obj, "token_id"),
            label=obj.get("label"),
            scopes=list(obj.get("scopes") or []),
            expires_at=parse_time(obj.get("expires_at")),
            issued_at=parse_time(obj.get("issued_at")),
            expired=bool(obj.get("expired", False)),
            raw=dict(obj),
        )


@dataclass(frozen=True)
class AdminToken:
    """``AdminClient.create_admin_token`` answer: a tenant admin token (``token``, its secret,
    shown this once), an admin inside ``tenant`` only."""

    token_id: str
    token: str
    tenant: str
    label: Optional[str]

    def __repr__(self) -> str:  # never print a secret by accident
        return f"AdminToken(token_id={self.token_id!r}, tenant={self.tenant!r}, label={self.label!r})"

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "AdminToken":
        return cls(token_id=_req(obj, "token_id"), token=_req(obj, "token"), tenant=_req(obj, "tenant"), label=obj.get("label"))


@dataclass(frozen=True)
class AdminTokenInfo:
    """A tenant admin token as ``AdminClient.admin_tokens`` lists it (never its secret)."""

    token_id: str
    tenant: str
    label: Optional[str]
    issued_at: Optional[datetime]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "AdminTokenInfo":
        return cls(
            token_id=_req(obj, "token_id"),
            tenant=_req(obj, "tenant"),
            label=obj.get("label"),
            issued_at=parse_time(obj.get("issued_at")),
        )
