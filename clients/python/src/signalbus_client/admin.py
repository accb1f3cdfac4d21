"""``AdminClient``: the calls made with the admin token — register, rotate, remove, roster,
rebuild.

Deliberately HTTP only and separate from the agent's ``Client``: an admin opens no session.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional
from urllib.parse import quote

import httpx

from .http import HttpApi, clean
from .types import Agent, Registration, Removal


class AdminClient:
    """Admin calls with the admin token: register, rotate, remove, roster, rebuild."""

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
