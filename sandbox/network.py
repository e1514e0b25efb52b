"""What a sandbox with a network policy gets: a grant (its allowed domains and domain secrets) registered with
the egress proxy under a token of its own, and the environment that sends its traffic there.

The token is the sandbox's proxy password: the proxy knows the sandbox by it. A secret's value goes to the
proxy only; the sandbox's environment holds its placeholder, which the proxy replaces in HTTPS headers bound
for the secret's domain."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from .config import SandboxNetwork

CA_PATH = "/tmp/.egress-ca.pem"  # written by the kernel at start (kernel.py), from EGRESS_CA_PEM
# Every client the sandbox has reads one of these for its trust store or its proxy.
_CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS")
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


class EgressUnavailable(OSError):
    """The egress proxy did not take the sandbox's grant: the call fails with this, the response goes on."""


@dataclass(frozen=True)
class DomainSecret:
    domain: str
    name: str  # the environment variable holding the placeholder
    placeholder: str
    value: str


@dataclass(frozen=True)
class NetworkGrant:
    tenant: str
    allowed_domains: tuple[str, ...]
    secrets: tuple[DomainSecret, ...] = ()


@dataclass(frozen=True)
class NetworkAccess:
    """What the model is told of a sandbox's network: where it reaches, and the variables its secrets are in."""

    domains: tuple[str, ...]
    secret_names: tuple[str, ...] = ()

    def described(self) -> str:
        words = (
            f"Internet access is limited to these domains: {', '.join(self.domains)}, over HTTP(S) through a proxy "
            "the environment already names (pip, curl, git and Python's HTTP libraries use it); other hosts and IP "
            "addresses are refused."
        )
        if self.secret_names:
            names = ", ".join(f"${name}" for name in self.secret_names)
            words += (
                f" Credentials for them are in the environment variables {names}: put the variable in the request's "
                "header (e.g. Authorization: Bearer $NAME); it works only in HTTPS requests to its own domain."
            )
        return words


def new_token() -> str:
    return secrets.token_urlsafe(32)


def environment(grant: NetworkGrant, token: str, config: SandboxNetwork, ca_pem: str) -> list[str]:
    """The sandbox's environment: the proxy (its token as the password), its CA, the placeholders."""
    parts = urlsplit(config.proxy_url)
    proxy = parts._replace(netloc=f"sandbox:{token}@{parts.netloc}").geturl()
    env = [f"{name}={proxy}" for name in _PROXY_VARIABLES]
    env += ["NO_PROXY=", "no_proxy=", f"EGRESS_CA_PEM={ca_pem}"]
    env += [f"{name}={CA_PATH}" for name in _CA_VARIABLES]
    env += list(dict.fromkeys(f"{secret.name}={secret.placeholder}" for secret in grant.secrets))  # a secret for several domains: once
    return env


class EgressClient:
    """The gateway's side of the proxy's control API (egress/control.py)."""

    def __init__(self, config: SandboxNetwork, key: str) -> None:
        self.config = config
        self._client = httpx.AsyncClient(
            base_url=config.control_url, headers={"Authorization": f"Bearer {key}"}, timeout=config.timeout_s, trust_env=False
        )
        self._ca: str | None = None

    async def ca_pem(self) -> str:
        if self._ca is None:
            self._ca = (await self._call("GET", "/ca.pem")).text
        return self._ca

    async def register(self, token: str, grant: NetworkGrant, expires_in_s: float) -> None:
        config = self.config
        body: dict[str, Any] = {
            "tenant": grant.tenant,
            "allowed_domains": list(grant.allowed_domains),
            "secrets": [{"domain": s.domain, "placeholder": s.placeholder, "value": s.value} for s in grant.secrets],
            "max_connections": config.max_connections,
            "max_bytes": config.max_bytes,
            "max_connection_s": config.max_connection_s,
            "expires_in_s": expires_in_s,
        }
        await self._call("PUT", f"/grants/{token}", json=body)

    async def healthy(self) -> bool:
        try:
            return (await self._client.get("/health")).status_code == 200
        except httpx.HTTPError:
            return False

    async def forget(self, token: str) -> None:
        await self._call("DELETE", f"/grants/{token}")

    async def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise EgressUnavailable(f"the sandbox egress proxy is unreachable ({type(exc).__name__})") from None
        if response.status_code >= 300:
            raise EgressUnavailable(f"the sandbox egress proxy refused the sandbox's network grant ({response.status_code})")
        return response

    async def aclose(self) -> None:
        await self._client.aclose()
