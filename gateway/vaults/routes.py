"""`/v1/vaults` (not under `/agents`): vaults and their credentials, for MCP servers and hosted environments.
A credential's secrets go in and never come out: not in an answer, a list, a log line or an error."""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence, TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..core.ids import new_id
from ..core.requests import metadata_query, tenant_of
from ..errors import APIError, bad_request, not_found
from ..jsontext import JSONResponse
from ..storage.file_store import TooMany
from ..storage.paging import PageQuery, listing, page_query, unknown_after
from ..storage.vault_store import Credential, Vault
from ..web.body import parse_body
from .credentials import credential_object, made, rotated
from .models import CredentialCreate, CredentialUpdate, VaultCreate, VaultUpdate
from .needs import needs_of

T = TypeVar("T", Vault, Credential)

MAX_VAULTS = 1000  # per tenant
MAX_CREDENTIALS = 100  # per vault


def vault_object(vault: Vault) -> dict[str, Any]:
    return {"id": vault.id, "object": "vault", "created_at": vault.created_at, "name": vault.body["name"], "metadata": vault.body["metadata"]}


def _statuses(request: Request) -> set[str]:
    """`status` or `status[]`: every vault and credential here is active (none is archived)."""
    given = set(request.query_params.getlist("status") + request.query_params.getlist("status[]")) or {"active"}
    if not given <= {"active", "archived"}:
        raise bad_request("status must be active or archived.", param="status")
    return given


async def create_vault(request: Request) -> Response:
    services = needs_of(request)
    body = await parse_body(request, VaultCreate, services.config.server.body_limits(), allow_empty=True)
    name = body.name.strip() if body.name is not None else None
    if body.name is not None and not name:
        raise bad_request("name must hold 1 to 256 bytes once trimmed.", param="name")
    vault = Vault(new_id("vault"), tenant_of(request), int(time.time()), {"name": name, "metadata": body.metadata or {}})
    try:
        await services.vaults.create(vault, MAX_VAULTS)
    except TooMany as exc:
        raise bad_request(f"This gateway keeps at most {exc.limit} vaults per project.", code="too_many_vaults") from None
    return JSONResponse(vault_object(vault))


async def list_vaults(request: Request) -> Response:
    services, query = needs_of(request), page_query(request)
    return _listed(request, await services.vaults.vaults(tenant_of(request), query), query, vault_object)


def _listed(request: Request, found: tuple[Sequence[T], bool] | None, query: PageQuery, shown: Callable[[T], dict[str, Any]]) -> Response:
    """A page of vaults or credentials, those with the metadata and status the query asks for."""
    if found is None:
        raise unknown_after(query.after or "")
    records, more = found
    wanted, statuses = metadata_query(request), _statuses(request)
    kept = [shown(record) for record in records if "active" in statuses and all(record.body["metadata"].get(k) == v for k, v in wanted.items())]
    return JSONResponse(listing(kept, more))


async def retrieve_vault(request: Request) -> Response:
    return JSONResponse(vault_object(await _vault(request)))


async def update_vault(request: Request) -> Response:
    services = needs_of(request)
    change = await parse_body(request, VaultUpdate, services.config.server.body_limits(), allow_empty=True)
    vault = await _vault(request)
    body = dict(vault.body)
    if "name" in change.model_fields_set:
        body["name"] = change.name.strip() if change.name is not None else None
    if change.metadata is not None:
        body["metadata"] = change.metadata
    updated = await services.vaults.update(vault.id, vault.tenant, body)
    if updated is None:
        raise _no_vault(vault.id)
    return JSONResponse(vault_object(updated))


async def delete_vault(request: Request) -> Response:
    services, vault_id = needs_of(request), request.path_params["vault_id"]
    if not await services.vaults.delete(vault_id, tenant_of(request)):
        raise _no_vault(vault_id)
    return JSONResponse({"id": vault_id, "object": "vault.deleted", "deleted": True})


async def _vault(request: Request) -> Vault:
    vault_id = request.path_params["vault_id"]
    found = await needs_of(request).vaults.vault(vault_id, tenant_of(request))
    if found is None:
        raise _no_vault(vault_id)
    return found


def _no_vault(vault_id: str) -> APIError:
    return not_found(f"No vault found with id '{vault_id}'.", param="vault_id")


# Credentials


async def create_credential(request: Request) -> Response:
    services = needs_of(request)
    body = await parse_body(request, CredentialCreate, services.config.server.body_limits())
    vault = await _vault(request)
    if not body.name.strip():
        raise bad_request("name must hold 1 to 256 bytes once trimmed.", param="name")
    credential = made(body, vault.id, vault.tenant, services.sealer, services.config.mcp.allowed_urls)
    try:
        await services.vaults.add(credential, MAX_CREDENTIALS)
    except TooMany as exc:
        raise bad_request(f"A vault holds at most {exc.limit} credentials.", code="too_many_credentials") from None
    return JSONResponse(credential_object(credential))


async def list_credentials(request: Request) -> Response:
    services, query = needs_of(request), page_query(request)
    vault = await _vault(request)
    return _listed(request, await services.vaults.credentials(vault.id, query), query, credential_object)


async def retrieve_credential(request: Request) -> Response:
    services, vault = needs_of(request), await _vault(request)
    credential_id = request.path_params["credential_id"]
    found = await services.vaults.credential(vault.id, credential_id, vault.tenant)
    if found is None:
        raise _no_credential(credential_id)
    return JSONResponse(credential_object(found))


async def update_credential(request: Request) -> Response:
    services = needs_of(request)
    change = await parse_body(request, CredentialUpdate, services.config.server.body_limits(), allow_empty=True)
    vault, credential_id = await _vault(request), request.path_params["credential_id"]
    found = await services.vaults.credential(vault.id, credential_id, vault.tenant)
    if found is None:
        raise _no_credential(credential_id)
    rotated(found, change, services.sealer)
    await services.vaults.replace(found)
    return JSONResponse(credential_object(found))


async def delete_credential(request: Request) -> Response:
    services, vault = needs_of(request), await _vault(request)
    credential_id = request.path_params["credential_id"]
    if not await services.vaults.remove(vault.id, credential_id, vault.tenant):
        raise _no_credential(credential_id)
    return JSONResponse({"id": credential_id, "object": "vault.credential.deleted", "deleted": True})


def _no_credential(credential_id: str) -> APIError:
    return not_found(f"No credential found with id '{credential_id}'.", param="credential_id")


routes = [
    Route("/v1/vaults", create_vault, methods=["POST"]),
    Route("/v1/vaults", list_vaults, methods=["GET"]),
    Route("/v1/vaults/{vault_id}", retrieve_vault, methods=["GET"]),
    Route("/v1/vaults/{vault_id}", update_vault, methods=["POST"]),
    Route("/v1/vaults/{vault_id}", delete_vault, methods=["DELETE"]),
    Route("/v1/vaults/{vault_id}/credentials", create_credential, methods=["POST"]),
    Route("/v1/vaults/{vault_id}/credentials", list_credentials, methods=["GET"]),
    Route("/v1/vaults/{vault_id}/credentials/{credential_id}", retrieve_credential, methods=["GET"]),
    Route("/v1/vaults/{vault_id}/credentials/{credential_id}", update_credential, methods=["POST"]),
    Route("/v1/vaults/{vault_id}/credentials/{credential_id}", delete_credential, methods=["DELETE"]),
]
