"""OAuth access tokens kept fresh: a credential whose token expires within `REFRESH_MARGIN_S` is refreshed at its
token endpoint (RFC 6749 §6, the refresh_token grant) before it is used, by one replica at a time (the store's
claim); the others wait for the token it writes. A token endpoint's answer is hostile input: bounded in time
and size, parsed strictly, and never logged (nor its error, which may echo a secret)."""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any
from urllib.parse import quote

import anyio
import httpx

from connectors.browser.guard import AddressPolicy, BlockedURL
from connectors.outbound import destination

from ..core.sealed import Sealer
from ..metrics import Metrics
from ..storage.vault_store import Credential, VaultStore
from .credentials import opened, seal

log = logging.getLogger("gateway.vaults")

REFRESH_MARGIN_S = 60.0  # a token expiring sooner than this is refreshed before it is used
CLAIM_S = 30.0  # a refresh's claim: past it, another replica may try
WAIT_STEP_S = 0.05
MAX_ANSWER_BYTES = 65_536


class TokenRefresher:
    def __init__(self, store: VaultStore, sealer: Sealer, replica: str, allowed_urls: list[str], metrics: Metrics, timeout_s: float = 10.0) -> None:
        self._store, self._sealer, self._replica, self._metrics = store, sealer, replica, metrics
        self._allowed, self._timeout_s = allowed_urls, timeout_s
        self._policy = AddressPolicy()
        # trust_env off: a proxy from the environment would reach what the guard did not check.
        self._http = httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=timeout_s)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def access_token(self, credential: Credential) -> str:
        """The credential's access token, refreshed first when it is about to expire and can be."""
        if not _due(credential) or credential.body["auth"].get("refresh") is None:
            return str(opened(credential, self._sealer)["access_token"])
        deadline = time.time() + self._timeout_s + CLAIM_S
        current: Credential | None = credential
        while current is not None and _due(current) and time.time() < deadline:
            now = time.time()
            if await self._store.claim_refresh(current.id, self._replica, now, now + CLAIM_S, now + REFRESH_MARGIN_S):
                return await self._refresh(current)
            await anyio.sleep(WAIT_STEP_S)  # another replica refreshes it: its token is written soon
            current = await self._store.current(credential.id)
        return str(opened(current or credential, self._sealer)["access_token"])  # stale at worst: the server refuses it

    async def _refresh(self, credential: Credential) -> str:
        secrets = opened(credential, self._sealer)
        try:
            answer = await self._ask(credential.body["auth"]["refresh"], secrets)
        except _Refused as exc:
            log.warning("vault credential %s: its OAuth token could not be refreshed (%s)", credential.id, exc)
            self._metrics.token_refresh("refused")
            await self._store.refreshed(credential.id, self._replica, None, None, credential.updated_at)
            return str(secrets["access_token"])
        secrets["access_token"] = answer["access_token"]
        if isinstance(answer.get("refresh_token"), str) and answer["refresh_token"]:
            secrets["refresh_token"] = answer["refresh_token"]  # rotated (OAuth 2.1): the old one is spent
        lifetime = answer.get("expires_in")
        expires_at = time.time() + float(lifetime) if isinstance(lifetime, (int, float)) and 0 < lifetime < 10 * 365 * 86_400 else None
        sealed = seal(secrets, self._sealer, credential.tenant)
        await self._store.refreshed(credential.id, self._replica, sealed, expires_at, int(time.time()))
        self._metrics.token_refresh("refreshed")
        return str(secrets["access_token"])

    async def _ask(self, refresh: dict[str, Any], secrets: dict[str, Any]) -> dict[str, Any]:
        form = {"grant_type": "refresh_token", "refresh_token": secrets["refresh_token"]}
        headers = {"Accept": "application/json"}
        method = refresh["token_endpoint_auth"]["type"]
        if method == "client_secret_basic":  # RFC 6749 §2.3.1: each part form-encoded first
            pair = f"{quote(refresh['client_id'], safe='')}:{quote(secrets['client_secret'] or '', safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form["client_id"] = refresh["client_id"]
            if method == "client_secret_post":
                form["client_secret"] = secrets["client_secret"] or ""
        for name in ("scope", "resource"):
            if refresh.get(name):
                form[name] = refresh[name]
        try:
            with anyio.fail_after(self._timeout_s):
                target = await destination(refresh["token_endpoint"], self._allowed, self._policy, self._timeout_s, "mcp.allowed_urls")
                request = self._http.build_request(
                    "POST", target.connect_url, data=form, headers={**headers, **target.headers}, extensions=target.extensions
                )
                response = await self._http.send(request, stream=True)
                try:
                    body = b""
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_ANSWER_BYTES:
                            raise _Refused("its answer is too large")
                finally:
                    await response.aclose()
        except TimeoutError:
            raise _Refused(f"no answer within {self._timeout_s:g} s") from None
        except BlockedURL as exc:
            raise _Refused(str(exc)) from None
        except httpx.HTTPError as exc:
            raise _Refused(type(exc).__name__) from None
        if response.status_code != 200:
            raise _Refused(f"the token endpoint answered {response.status_code}")
        try:
            answer = json.loads(body)
        except ValueError:
            raise _Refused("its answer is not JSON") from None
        if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str) or not answer["access_token"]:
            raise _Refused("its answer has no access_token")
        return answer


class _Refused(Exception):
    """The refresh failed; the message says why, never with a secret."""


def _due(credential: Credential) -> bool:
    return credential.expires_at is not None and credential.expires_at <= time.time() + REFRESH_MARGIN_S
