"""A credential as kept and as shown (openai 3.57 `Credential`): its secrets (tokens, client secret, secret value)
sealed for its tenant apart from the rest, never shown, logged or put in an error; what it authorizes checked
as it is made (an https URL, or one the operator allowed; hosts without scheme, port or wildcard)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import time
from typing import Any

from connectors.urls import is_allowed, parse
from runtime.domains import domain_problem

from ..core.ids import new_id
from ..core.sealed import Purpose, Sealer
from ..errors import bad_request
from ..files.network import reserved_name
from ..storage.vault_store import Credential
from .models import CredentialCreate, CredentialUpdate, EnvironmentVariable, McpOAuth, McpOAuthRotate, StaticBearer, StaticBearerRotate


def checked_url(url: str, allowed: list[str], param: str) -> str:
    """An MCP server's or token endpoint's URL: https, or one `mcp.allowed_urls` lists (a private server)."""
    parts = parse(url)
    if parts is None or not (parts.scheme == "https" or is_allowed(url, allowed)):
        raise bad_request("The URL must be a plain https URL (an http one must be listed in the gateway's mcp.allowed_urls).", param=param)
    return url


def expiry(given: str | None, param: str) -> float | None:
    if given is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(given)
    except ValueError:
        raise bad_request("expires_at must be an RFC 3339 timestamp.", param=param) from None
    if moment.tzinfo is None:
        raise bad_request("expires_at needs its UTC offset (or Z).", param=param)
    return moment.timestamp()


def rfc3339(moment: float | None) -> str | None:
    return dt.datetime.fromtimestamp(moment, dt.UTC).isoformat().replace("+00:00", "Z") if moment is not None else None


def _hosts(given: list[str], param: str) -> list[str]:
    hosts: list[str] = []
    for index, host in enumerate(given):
        host = host.lower()
        try:
            address = ipaddress.ip_address(host)
            if address.version != 4:
                raise bad_request("IPv6 addresses are not supported.", param=f"{param}[{index}]")
        except ValueError:
            problem = domain_problem(host)
            if problem is not None or "*" in host:
                raise bad_request(f"'{host[:100]}' is not a host name ({problem or 'no wildcards'}).", param=f"{param}[{index}]") from None
        if host in hosts:
            raise bad_request(f"'{host}' is listed twice.", param=f"{param}[{index}]")
        hosts.append(host)
    return hosts


def made(body: CredentialCreate, vault_id: str, tenant: str, sealer: Sealer, allowed_urls: list[str]) -> Credential:
    """The credential a create request makes, its secrets sealed."""
    auth, now = body.auth, int(time.time())
    secrets: dict[str, Any]
    expires_at = None
    if isinstance(auth, McpOAuth):
        shown: dict[str, Any] = {"type": "mcp_oauth", "mcp_server_url": checked_url(auth.mcp_server_url, allowed_urls, "auth.mcp_server_url")}
        expires_at = expiry(auth.expires_at, "auth.expires_at")
        secrets = {"access_token": auth.access_token}
        refresh = auth.refresh
        if refresh is not None:
            endpoint = checked_url(refresh.token_endpoint, allowed_urls, "auth.refresh.token_endpoint")
            shown["refresh"] = {
                "client_id": refresh.client_id, "token_endpoint": endpoint, "resource": refresh.resource, "scope": refresh.scope,
                "token_endpoint_auth": {"type": refresh.token_endpoint_auth.type},
            }  # fmt: skip
            secrets["refresh_token"] = refresh.refresh_token
            secrets["client_secret"] = getattr(refresh.token_endpoint_auth, "client_secret", None)
        else:
            shown["refresh"] = None
    elif isinstance(auth, StaticBearer):
        shown = {"type": "static_bearer", "mcp_server_url": checked_url(auth.mcp_server_url, allowed_urls, "auth.mcp_server_url")}
        secrets = {"token": auth.token}
    else:
        shown = _environment_variable(auth)
        secrets = {"secret_value": auth.secret_value}
    body_kept = {"name": body.name.strip(), "metadata": body.metadata or {}, "auth": shown}
    return Credential(new_id("cred"), vault_id, tenant, now, now, body_kept, seal(secrets, sealer, tenant), expires_at)


def _environment_variable(auth: EnvironmentVariable) -> dict[str, Any]:
    if reserved_name(auth.secret_name) or auth.secret_name.upper().startswith("CODEX_"):
        raise bad_request(f"'{auth.secret_name}' is a reserved environment variable name.", param="auth.secret_name")
    if not (auth.secret_value.isascii() and auth.secret_value.isprintable()):
        raise bad_request("secret_value must be printable ASCII (no carriage returns, newlines or NUL bytes).", param="auth.secret_value")
    networking: dict[str, Any] = {"type": auth.networking.type}
    if auth.networking.type == "limited":
        networking["allowed_hosts"] = _hosts(auth.networking.allowed_hosts, "auth.networking.allowed_hosts")
    return {"type": "environment_variable", "secret_name": auth.secret_name, "networking": networking}


def rotated(credential: Credential, change: CredentialUpdate, sealer: Sealer) -> None:
    """`change` applied: new secrets for the same method (the method and what it authorizes stay)."""
    if change.metadata is not None:
        credential.body["metadata"] = change.metadata
    auth = change.auth
    if auth is None:
        return
    if auth.type != credential.body["auth"]["type"]:
        raise bad_request(f"This credential is {credential.body['auth']['type']}: it cannot be rotated as {auth.type}.", param="auth.type")
    secrets = opened(credential, sealer)
    if isinstance(auth, McpOAuthRotate):
        if auth.access_token is not None:
            secrets["access_token"] = auth.access_token
            credential.expires_at = None  # a new token without an expiry clears the old one's
        if "expires_at" in auth.model_fields_set:
            credential.expires_at = expiry(auth.expires_at, "auth.expires_at")
        refresh = auth.refresh
        if refresh is not None:
            if credential.body["auth"].get("refresh") is None:
                raise bad_request("This credential has no refresh configuration to rotate.", param="auth.refresh")
            if refresh.refresh_token is not None:
                secrets["refresh_token"] = refresh.refresh_token
            if "scope" in refresh.model_fields_set:
                credential.body["auth"]["refresh"]["scope"] = refresh.scope
            if refresh.token_endpoint_auth is not None and refresh.token_endpoint_auth.client_secret is not None:
                secrets["client_secret"] = refresh.token_endpoint_auth.client_secret
    elif isinstance(auth, StaticBearerRotate):
        secrets["token"] = auth.token
    else:
        if not (auth.secret_value.isascii() and auth.secret_value.isprintable()):
            raise bad_request("secret_value must be printable ASCII (no carriage returns, newlines or NUL bytes).", param="auth.secret_value")
        secrets["secret_value"] = auth.secret_value
    credential.secret = seal(secrets, sealer, credential.tenant)
    credential.updated_at = max(int(time.time()), credential.updated_at)


def seal(secrets: dict[str, Any], sealer: Sealer, tenant: str) -> str:
    return sealer.seal(json.dumps(secrets), Purpose.VAULT_SECRET, tenant)


def opened(credential: Credential, sealer: Sealer) -> dict[str, Any]:
    opened_secrets: dict[str, Any] = json.loads(sealer.open(credential.secret, Purpose.VAULT_SECRET, credential.tenant))
    return opened_secrets


def credential_object(credential: Credential) -> dict[str, Any]:
    auth = dict(credential.body["auth"])
    if auth["type"] == "mcp_oauth":
        auth["expires_at"] = rfc3339(credential.expires_at)
    return {
        "id": credential.id, "object": "vault.credential", "vault_id": credential.vault_id, "created_at": credential.created_at,
        "updated_at": credential.updated_at, "name": credential.body["name"], "metadata": credential.body["metadata"], "auth": auth,
    }  # fmt: skip
