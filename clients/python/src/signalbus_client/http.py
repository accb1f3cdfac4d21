"""The HTTP half of the bus's API: one request with its answer typed — a 2xx's JSON, else the
typed error of ``errors.py``; a bus that cannot be reached is ``TransportError``, no answer in
time ``RequestTimeout``.

Deliberately no retry and no session: callers decide what a failure means (``session.py``
falls back to it, ``client.py`` spools a send), and it imports nothing of the client above it.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Optional, Tuple
from urllib.parse import quote, urlencode

import httpx

from .errors import NOTHING_SENT, ProtocolError, RateLimited, RequestTimeout, TransportError, error_from_body


def clean(obj: Mapping[str, Any]) -> Dict[str, Any]:
    """``obj`` without its ``None`` values (the bus's defaults apply to fields left out)."""
    return {k: v for k, v in obj.items() if v is not None}


def group_path(name: str) -> str:
    """``/v1/groups/<name>``: in paths a group goes without its ``@`` (either spelling is taken)."""
    return "/v1/groups/" + quote(name[1:] if name.startswith("@") else name, safe="")


class HttpApi:
    """Shared HTTP plumbing: typed errors, transport failures as TransportError."""

    def __init__(self, url: str, token: str, timeout: float, http: Optional[httpx.AsyncClient]) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be the bus's http(s) base URL, got {url!r}")
        self.url = url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Optional[Mapping[str, Any]] = None,
        ok_statuses: Iterable[int] = (),
        dedupe_key: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Any:
        """The answer's JSON (see ``exchange``)."""
        _, data = await self.exchange(
            method, path, body=body, params=params, ok_statuses=ok_statuses, dedupe_key=dedupe_key, timeout=timeout
        )
        return data

    async def exchange(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Optional[Mapping[str, Any]] = None,
        ok_statuses: Iterable[int] = (),
        dedupe_key: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Tuple[int, Any]:
        """One request: its status and JSON when 2xx (or in ``ok_statuses``), else the typed
        error. ``timeout`` (default: the client's) is for calls the bus holds on purpose (a
        ``wait``)."""
        timeout = self._timeout if timeout is None else timeout
        url = self.url + path
        if params:
            query = urlencode({k: v for k, v in params.items() if v is not None})
            if query:
                url += "?" + query
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        details = {"dedupe_key": dedupe_key} if dedupe_key else {}
        try:
            response = await self._http.request(method, url, json=body, headers=headers, timeout=timeout)
        except httpx.TimeoutException as exc:
            raise RequestTimeout(f"{method} {path}: no answer within {timeout}s ({exc.__class__.__name__})", details=details) from exc
        except httpx.ConnectError as exc:  # before the request: the bus got nothing
            raise TransportError(f"{method} {path}: cannot connect to the bus ({exc})", hint=NOTHING_SENT, details=details) from exc
        except httpx.TransportError as exc:
            raise TransportError(f"{method} {path}: the bus could not be reached ({exc})", details=details) from exc
        try:
            data = response.json() if response.content else None
        except ValueError:
            data = None
        if 200 <= response.status_code < 300 or response.status_code in ok_statuses:
            if data is None and response.status_code != 204:
                raise ProtocolError(f"{method} {path}: the bus answered {response.status_code} without a JSON body")
            return response.status_code, data
        if data is None and response.status_code in (502, 504):
            raise TransportError(f"{method} {path}: a proxy answered {response.status_code}; the bus may not have seen the request", status=response.status_code, details=details)
        if data is None and response.status_code == 429:
            retry = response.headers.get("retry-after")
            raise RateLimited(f"{method} {path}: rate limited", status=429, details={"retry_after_ms": float(retry) * 1000} if retry and retry.isdigit() else {})
        err = error_from_body(data, response.status_code)
        if dedupe_key and err.code == "unavailable":
            err.details.setdefault("dedupe_key", dedupe_key)
        raise err

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()
