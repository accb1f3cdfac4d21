"""``AdminClient``: the calls made with the admin token — register, rotate, remove, roster,
rebuild, groups (create, delete, members) and force-expire.

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
from .types import Agent, ExpirePreview, ExpireResult, Group, Registration, Removal


class AdminClient:
    """Admin calls with the admin token: register, rotate, remove, roster, rebuild, groups,
    force-expire."""

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
