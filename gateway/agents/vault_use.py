"""What a session's vaults give its runs: a bearer token for each MCP server a credential authorizes (the one
the tool names by `credential_id`, or the only one whose `mcp_server_url` is the server's), sent to that
server alone; and, in a hosted environment, each `environment_variable` credential as a domain secret (the
container holds a placeholder, the egress proxy puts the secret in HTTPS requests to the allowed hosts)."""

from __future__ import annotations

from typing import Any

from runtime.domains import matches

from ..errors import bad_request, not_found
from ..files.network import DomainSecretParam
from ..storage.agent_store import SessionRecord
from ..storage.vault_store import Credential
from ..vaults.credentials import opened
from .needs import AgentsNeeds

MAX_VAULTS = 10
MCP_KINDS = ("mcp_oauth", "static_bearer")


async def checked_vaults(services: AgentsNeeds, tenant: str, vault_ids: list[str] | None, param: str = "vault_ids") -> list[str]:
    """The vaults a session (or an automation's new session) names: the tenant's, at most ten, each once."""
    given = list(dict.fromkeys(vault_ids or []))
    if len(given) > MAX_VAULTS:
        raise bad_request(f"A session names at most {MAX_VAULTS} vaults.", param=param)
    for index, vault_id in enumerate(given):
        if await services.vaults.vault(vault_id, tenant) is None:
            raise not_found(f"No vault found with id '{vault_id}'.", param=f"{param}[{index}]")
    return given


async def mcp_tokens(services: AgentsNeeds, session: SessionRecord) -> dict[str, str]:
    """Server label -> the bearer token its credential gives, for the session's MCP tools that have one."""
    tools = [tool for tool in session.body["agent"]["tools"] if tool["type"] == "mcp"]
    vault_ids = session.body.get("vault_ids") or []
    if not tools or not vault_ids:
        return {}
    credentials = [
        credential for credential in await services.vaults.in_vaults(vault_ids, session.tenant) if credential.body["auth"]["type"] in MCP_KINDS
    ]
    tokens: dict[str, str] = {}
    for tool in tools:
        credential = _credential_for(tool, credentials)
        if credential is None:
            continue
        if credential.body["auth"]["type"] == "static_bearer":
            tokens[tool["server_label"]] = str(opened(credential, services.sealer)["token"])
        else:
            tokens[tool["server_label"]] = await services.token_refresher.access_token(credential)
    return tokens


def _credential_for(tool: dict[str, Any], credentials: list[Credential]) -> Credential | None:
    named = tool.get("credential_id")
    if named is not None:  # one of the session's vaults' credentials, for this very server
        found = [credential for credential in credentials if credential.id == named]
    else:
        found = [credential for credential in credentials if credential.body["auth"]["mcp_server_url"] == tool["transport"]["server_url"]]
    return found[0] if len(found) == 1 and found[0].body["auth"]["mcp_server_url"] == tool["transport"]["server_url"] else None


async def domain_secrets(services: AgentsNeeds, tenant: str, vault_ids: list[str], allowed_domains: list[str]) -> list[DomainSecretParam]:
    """The vaults' environment-variable credentials as the domain secrets of an environment allowed these
    domains: each host a credential names that the environment may reach (`unrestricted`: every allowed domain)."""
    secrets: list[DomainSecretParam] = []
    for credential in await services.vaults.in_vaults(vault_ids, tenant):
        auth = credential.body["auth"]
        if auth["type"] != "environment_variable":
            continue
        networking = auth["networking"]
        hosts = networking["allowed_hosts"] if networking["type"] == "limited" else allowed_domains
        value = str(opened(credential, services.sealer)["secret_value"])
        for host in hosts:
            if any(host == domain or matches(host, domain) for domain in allowed_domains):
                secrets.append(DomainSecretParam(domain=host, name=auth["secret_name"], value=value))
    return secrets
