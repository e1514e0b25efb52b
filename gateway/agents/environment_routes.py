"""`/v1/agents/environments` (create, list, retrieve; their files) and `/v1/agents/environments/templates`
(create, list, retrieve, update, delete): environments.py does the work."""

from __future__ import annotations

import time
from typing import Literal

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..core.ids import new_id
from ..core.models import StrictModel
from ..core.requests import tenant_of
from ..errors import APIError, bad_request, not_found
from ..jsontext import JSONResponse
from ..storage.environment_store import Kept
from ..storage.file_store import TooMany
from ..storage.paging import listing, page_query, page_shown, unknown_after
from ..web.body import parse_body
from .environments import TemplateConfig, add_file, checked_template, environment_info, provision, template_object
from .models import FileByID, HostedEnvironment, InlineFile
from .needs import needs_of
from .vault_use import checked_vaults


class EnvironmentCreate(StrictModel):
    environment: HostedEnvironment
    vault_ids: list[str] | None = None


class FileCreate(StrictModel):
    """`environments.files.create`: a `file_id` file or an `inline` one, its fields at the top."""

    type: Literal["file_id", "inline"]
    path: str
    file_id: str | None = None
    data: str | None = None

    def file(self) -> FileByID | InlineFile:
        given = self.model_dump(exclude_none=True)
        return FileByID.model_validate(given) if self.type == "file_id" else InlineFile.model_validate(given)


async def create_environment(request: Request) -> Response:
    services = needs_of(request)
    body = await parse_body(request, EnvironmentCreate, services.config.server.body_limits())
    tenant = tenant_of(request)
    kept = await provision(services, tenant, body.environment, vault_ids=await checked_vaults(services, tenant, body.vault_ids))
    return JSONResponse(environment_info(kept, "ready"))


async def list_environments(request: Request) -> Response:
    services, query = needs_of(request), page_query(request)
    found = await services.agent_environments.page(tenant_of(request), query)
    if found is None:
        raise unknown_after(query.after or "")
    kept, more = found
    return JSONResponse(listing([environment_info(environment, await _status(request, environment)) for environment in kept], more))


async def retrieve_environment(request: Request) -> Response:
    kept = await _environment(request)
    return JSONResponse(environment_info(kept, await _status(request, kept)))


async def _status(request: Request, kept: Kept) -> str:
    """Ready while its container lives; expired once the container's idle time ran out (its files gone)."""
    try:
        await needs_of(request).files.container(kept.id, kept.tenant)
    except APIError:
        return "expired"
    return "ready"


async def create_environment_file(request: Request) -> Response:
    services = needs_of(request)
    kept = await _environment(request)
    body = await parse_body(request, FileCreate, services.config.server.body_limits())
    container = await services.files.container(kept.id, kept.tenant, param="environment_id")
    shown = await add_file(services, container, body.file(), "file")
    kept.body["files"] = [file for file in kept.body["files"] if file["path"] != shown["path"]] + [shown]
    await services.agent_environments.update(kept.id, kept.tenant, kept.body, int(time.time()))
    return JSONResponse({"object": "agent.environment.file", "environment_id": kept.id, "path": shown["path"], "size_bytes": shown["size_bytes"]})


async def list_environment_files(request: Request) -> Response:
    kept = await _environment(request)
    files = [
        {"object": "agent.environment.file", "environment_id": kept.id, "path": file["path"], "size_bytes": file["size_bytes"]}
        for file in kept.body["files"]
    ]
    return JSONResponse({"object": "list", "data": files, "next_page": None, "has_more": False})


async def _environment(request: Request) -> Kept:
    environment_id = request.path_params["environment_id"]
    kept = await needs_of(request).agent_environments.get(environment_id, tenant_of(request))
    if kept is None:
        raise not_found(f"No environment found with id '{environment_id}'.", param="environment_id")
    return kept


async def create_template(request: Request) -> Response:
    services = needs_of(request)
    config = await parse_body(request, TemplateConfig, services.config.server.body_limits())
    now = int(time.time())
    kept = Kept(new_id("envtpl"), tenant_of(request), now, now, await checked_template(config))
    try:
        await services.agent_templates.create(kept, services.config.agents.max_environments_per_tenant)
    except TooMany as exc:
        raise bad_request(f"This gateway keeps at most {exc.limit} environment templates per project.", code="too_many_templates") from None
    return JSONResponse(template_object(kept))


async def list_templates(request: Request) -> Response:
    services, query = needs_of(request), page_query(request)
    return JSONResponse(page_shown(await services.agent_templates.page(tenant_of(request), query), query, template_object))


async def retrieve_template(request: Request) -> Response:
    return JSONResponse(template_object(await _template(request)))


async def update_template(request: Request) -> Response:
    services = needs_of(request)
    config = await parse_body(request, TemplateConfig, services.config.server.body_limits())
    kept = await _template(request)
    merged = TemplateConfig.model_validate({**kept.body, **config.model_dump(exclude_unset=True)})
    updated = await services.agent_templates.update(kept.id, kept.tenant, await checked_template(merged), int(time.time()))
    if updated is None:
        raise _no_template(kept.id)
    return JSONResponse(template_object(updated))


async def delete_template(request: Request) -> Response:
    services, template_id = needs_of(request), request.path_params["template_id"]
    if not await services.agent_templates.delete(template_id, tenant_of(request)):
        raise _no_template(template_id)
    return JSONResponse({"id": template_id, "object": "agent.environment.template.deleted", "deleted": True})


async def _template(request: Request) -> Kept:
    template_id = request.path_params["template_id"]
    kept = await needs_of(request).agent_templates.get(template_id, tenant_of(request))
    if kept is None:
        raise _no_template(template_id)
    return kept


def _no_template(template_id: str) -> APIError:
    return not_found(f"No environment template found with id '{template_id}'.", param="environment_template_id")


routes = [
    Route("/v1/agents/environments/templates", create_template, methods=["POST"]),
    Route("/v1/agents/environments/templates", list_templates, methods=["GET"]),
    Route("/v1/agents/environments/templates/{template_id}", retrieve_template, methods=["GET"]),
    Route("/v1/agents/environments/templates/{template_id}", update_template, methods=["POST"]),
    Route("/v1/agents/environments/templates/{template_id}", delete_template, methods=["DELETE"]),
    Route("/v1/agents/environments", create_environment, methods=["POST"]),
    Route("/v1/agents/environments", list_environments, methods=["GET"]),
    Route("/v1/agents/environments/{environment_id}", retrieve_environment, methods=["GET"]),
    Route("/v1/agents/environments/{environment_id}/files", create_environment_file, methods=["POST"]),
    Route("/v1/agents/environments/{environment_id}/files", list_environment_files, methods=["GET"]),
]
