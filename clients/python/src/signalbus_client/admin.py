"""``AdminClient``: the calls made with the admin token — register, rotate, remove, roster,
rebuild, groups (create, delete, members), force-expire, and tokens (an agent's scoped tokens;
tenant admin tokens). A tenant admin token makes the same calls inside its own tenant.

Deliberately HTTP only and separate from the agent's ``Client``: an admin opens no session.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any, Dict, List, Literal, Optional, Sequence, Union, overload
from urllib.parse import quote

import httpx

from .errors import UsageError
from .http import HttpApi, clean, group_path
from .tokens import AdminToken, AdminTokenInfo, IssuedToken, Scope, TokenInfo
from .types import Agent, ExpirePreview, ExpireResult, Group, Registration, Removal


class AdminClient:
    """Admin calls with the admin token (or a tenant admin token, inside its tenant): register,
    rotate, remove, roster, rebuild, groups, force-expire, tokens."""

    def __init__(self, url: str, admin_token: str, *, timeout: float = 15.0, http: Optional[httpx.AsyncClient] = None) -> None:
        self._api = HttpApi(url, admin_token, timeout, http)

    async def __aenter__(self) -> "AdminClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._api.aclose()

    async def register(self, identity: str, *, tenant: Optional[str] = None, kind: Optional[str] = None) -> Registration:
        data = await self._api.request("POST", "/v1/agents", body=clean({"identity": identity, "tenant": tenant, "kind": kind}))
        return Registration(tenant=data["tenant"], identity=data["identity"], token=data["token"])

    async def rotate(self, identity: str, *, tenant: Optional[str] = None) -> Registration:
        """New token for ``identity``; the old one stops working at once (its sessions close 1008)."""
        data = await self._api.request("POST", f"/v1/agents/{quote(identity, safe='')}/token", params={"tenant": tenant})
        return Registration(tenant=data.get("tenant", tenant or "default"), identity=data.get("identity", identity), token=data["token"])

    async def remove(self, identity: str, *, tenant: Optional[str] = None) -> Removal:
        """``DELETE /v1/agents/{identity}``: the token stops working, sessions close, pending
        signals expire; answers the bus's ``Removal`` (``removed_at``, ``signals_expired``).
        A bus without the route answers 404/405 (raised as NotFound/SignalbusError)."""
        data = await self._api.request("DELETE", f"/v1/agents/{quote(identity, safe='')}", params={"tenant": tenant})
        return Removal.from_json(data)

    async def agents(self, *, tenant: Optional[str] = None) -> List[Agent]:
        data = await self._api.request("GET", "/v1/agents", params={"tenant": tenant})
        return [Agent.from_json(a, data.get("tenant", "")) for a in data.get("agents", [])]

    async def rebuild(self) -> Dict[str, Any]:
        data: Dict[str, Any] = await self._api.request("POST", "/v1/admin/rebuild")
        return data

    # -- groups (CONTRACT §15) --------------------------------------------------------------

    async def create_group(
        self, name: str, *, self_join: bool = False, announce: bool = True, tenant: Optional[str] = None
    ) -> Group:
        """Create the group ``name`` (``"@builders"`` or ``"builders"``), or update its settings
        when it exists: ``self_join`` lets agents join and leave it themselves; ``announce`` sends
        ``PeerJoined`` / ``PeerLeft`` to the other members."""
        data = await self._api.request(
            "PUT", group_path(name), body=clean({"tenant": tenant, "self_join": self_join, "announce": announce})
        )
        return Group.from_json(data)

    async def delete_group(self, name: str, *, tenant: Optional[str] = None) -> None:
        """Delete a group; ``UnknownGroup`` for no such group."""
        await self._api.request("DELETE", group_path(name), params={"tenant": tenant})

    async def add_member(self, name: str, identity: str, *, tenant: Optional[str] = None) -> Group:
        """Add ``identity`` to the group (idempotent); ``UnknownRecipient`` for an unregistered one."""
        data = await self._api.request(
            "PUT", f"{group_path(name)}/members/{quote(identity, safe='')}", params={"tenant": tenant}
        )
        return Group.from_json(data)

    async def remove_member(self, name: str, identity: str, *, tenant: Optional[str] = None) -> Group:
        """Remove ``identity`` from the group (idempotent)."""
        data = await self._api.request(
            "DELETE", f"{group_path(name)}/members/{quote(identity, safe='')}", params={"tenant": tenant}
        )
        return Group.from_json(data)

    async def group(self, name: str, *, tenant: Optional[str] = None) -> Group:
        """One group of a tenant with each member's recipient state; ``UnknownGroup`` for none."""
        return Group.from_json(await self._api.request("GET", group_path(name), params={"tenant": tenant}))

    async def groups(self, *, tenant: Optional[str] = None) -> List[Group]:
        """A tenant's groups (default: ``default``), sorted by name, each member by identity only."""
        data = await self._api.request("GET", "/v1/groups", params={"tenant": tenant})
        return [Group.from_json(g) for g in data.get("groups") or []]

    # -- force-expire (CONTRACT §16) ----------------------------------------------------------

    @overload
    async def expire_signals(
        self,
        *,
        tenant: str,
        to: Optional[str] = ...,
        from_: Optional[str] = ...,
        signal_type: Optional[str] = ...,
        older_than: Union[float, timedelta, None] = ...,
        signal_ids: Optional[Sequence[str]] = ...,
        dry_run: Literal[False] = ...,
    ) -> ExpireResult: ...

    @overload
    async def expire_signals(
        self,
        *,
        tenant: str,
        to: Optional[str] = ...,
        from_: Optional[str] = ...,
        signal_type: Optional[str] = ...,
        older_than: Union[float, timedelta, None] = ...,
        signal_ids: Optional[Sequence[str]] = ...,
        dry_run: Literal[True],
    ) -> ExpirePreview: ...

    @overload
    async def expire_signals(
        self,
        *,
        tenant: str,
        to: Optional[str] = ...,
        from_: Optional[str] = ...,
        signal_type: Optional[str] = ...,
        older_than: Union[float, timedelta, None] = ...,
        signal_ids: Optional[Sequence[str]] = ...,
        dry_run: bool,
    ) -> Union[ExpireResult, ExpirePreview]: ...

    async def expire_signals(
        self,
        *,
        tenant: str,
        to: Optional[str] = None,
        from_: Optional[str] = None,
        signal_type: Optional[str] = None,
        older_than: Union[float, timedelta, None] = None,
        signal_ids: Optional[Sequence[str]] = None,
        dry_run: bool = False,
    ) -> Union[ExpireResult, ExpirePreview]:
        """Expire a tenant's pending signals now (``POST /v1/admin/signals/expire``): those
        matching every filter given — recipient ``to``, sender ``from_``, ``signal_type``,
        ``older_than`` (seconds or a ``timedelta`` since ``created_at``, rounded up), the ids in
        ``signal_ids`` — scheduled ones included. → ``ExpireResult`` (``.expired``, ``.skipped``:
        matched but delivered, recalled or expired first); their rows read
        ``expired_reason == "forced"``. With ``dry_run=True`` nothing is expired: →
        ``ExpirePreview`` (``.would_expire``: ``ExpireCandidate`` s, ``.count``). A tenant alone
        (no filter) is a ``UsageError`` (the bus refuses it too: it would expire everything)."""
        if not isinstance(tenant, str) or not tenant:
            raise UsageError(f"expire_signals takes a tenant (a non-empty str), got {tenant!r}")
        if isinstance(signal_ids, str):
            raise UsageError("signal_ids is a list of signal ids, not one str")
        seconds: Optional[int] = None
        if older_than is not None:
            age = older_than.total_seconds() if isinstance(older_than, timedelta) else older_than
            if isinstance(age, bool) or not isinstance(age, (int, float)) or not math.isfinite(age) or age <= 0:
                raise UsageError(f"older_than is a positive duration (seconds or a timedelta), got {older_than!r}")
            seconds = math.ceil(age)
        body = clean(
            {
                "tenant": tenant,
                "to": to,
                "from": from_,
                "signal_type": signal_type,
                "older_than_seconds": seconds,
                "signal_ids": None if signal_ids is None else list(signal_ids),
            }
        )
        if len(body) == 1:
            raise UsageError(
                "expire_signals needs a filter besides the tenant (to=, from_=, signal_type=, older_than=, signal_ids=): "
                "a tenant alone would expire every pending signal in it"
            )
        if dry_run:
            body["dry_run"] = True
            return ExpirePreview.from_json(await self._api.request("POST", "/v1/admin/signals/expire", body=body))
        return ExpireResult.from_json(await self._api.request("POST", "/v1/admin/signals/expire", body=body))

    # -- tokens (CONTRACT §17) ----------------------------------------------------------------

    async def issue_token(
        self,
        identity: str,
        *,
        tenant: Optional[str] = None,
        scopes: Optional[Sequence[Scope]] = None,
        expires_in: Union[float, timedelta, None] = None,
        label: Optional[str] = None,
    ) -> IssuedToken:
        """Issue another token for ``identity`` (``POST /v1/agents/{identity}/tokens``): it holds
        ``scopes`` (default: every scope), stops working ``expires_in`` after now (seconds or a
        ``timedelta``, rounded up; default: never) and is told apart by ``label``. →
        ``IssuedToken``, whose ``token`` is shown this once. ``NotFound`` for no such agent,
        ``InvalidRequest`` for an unknown or empty scope list, ``Forbidden`` for a tenant admin of
        another tenant."""
        if isinstance(scopes, str):
            raise UsageError(f"scopes is a list of scopes, not one str: scopes=[{scopes!r}]")
        seconds: Optional[int] = None
        if expires_in is not None:
            span = expires_in.total_seconds() if isinstance(expires_in, timedelta) else expires_in
            if isinstance(span, bool) or not isinstance(span, (int, float)) or not math.isfinite(span) or span <= 0:
                raise UsageError(f"expires_in is a positive duration (seconds or a timedelta), got {expires_in!r}")
            seconds = math.ceil(span)
        body = clean({"scopes": None if scopes is None else list(scopes), "expires_in_seconds": seconds, "label": label})
        data = await self._api.request("POST", _tokens_path(identity), body=body, params={"tenant": tenant})
        return IssuedToken.from_json(data)

    async def tokens(self, identity: str, *, tenant: Optional[str] = None) -> List[TokenInfo]:
        """``identity``'s tokens without their secrets: the registration token first
        (``token_id == "registration"``), then the issued ones not revoked."""
        data = await self._api.request("GET", _tokens_path(identity), params={"tenant": tenant})
        return [TokenInfo.from_json(t) for t in data.get("tokens") or []]

    async def revoke_token(self, identity: str, token_id: str, *, tenant: Optional[str] = None) -> None:
        """Revoke one of ``identity``'s issued tokens: it stops working at once and its sessions
        close (1008 ``token revoked``). Revoking it again changes nothing; ``NotFound`` for an id
        never issued to it; ``InvalidRequest`` for ``"registration"`` (``rotate`` replaces that)."""
        await self._api.request("DELETE", f"{_tokens_path(identity)}/{quote(token_id, safe='')}", params={"tenant": tenant})

    async def create_admin_token(self, tenant: str, *, label: Optional[str] = None) -> AdminToken:
        """A tenant admin token (the global admin only): an admin inside ``tenant`` only — any call
        naming another tenant is ``Forbidden``, as are ``rebuild`` and the admin-token calls but
        ``admin_tokens``. → ``AdminToken``, whose ``token`` is shown this once."""
        if not isinstance(tenant, str) or not tenant:
            raise UsageError(f"create_admin_token takes a tenant (a non-empty str), got {tenant!r}")
        data = await self._api.request("POST", "/v1/admin/tokens", body=clean({"tenant": tenant, "label": label}))
        return AdminToken.from_json(data)

    async def admin_tokens(self, *, tenant: Optional[str] = None) -> List[AdminTokenInfo]:
        """The tenant admin tokens (of ``tenant`` only, when given), without their secrets; a
        tenant admin lists its own tenant's."""
        data = await self._api.request("GET", "/v1/admin/tokens", params={"tenant": tenant})
        return [AdminTokenInfo.from_json(t) for t in data.get("tokens") or []]

    async def revoke_admin_token(self, token_id: str) -> None:
        """Revoke a tenant admin token (the global admin only): it stops working at once;
        ``NotFound`` for an unknown id."""
        await self._api.request("DELETE", f"/v1/admin/tokens/{quote(token_id, safe='')}")


def _tokens_path(identity: str) -> str:
    return f"/v1/agents/{quote(identity, safe='')}/tokens"
