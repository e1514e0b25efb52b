"""`/v1/agents/automations`: create, list (`session_id`, paging), retrieve, update, delete, pause, resume; and
each one's invocations (create: a manual run now; list; retrieve)."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..core.requests import refuse_while_draining, tenant_of
from ..errors import not_found
from ..jsontext import JSONResponse
from ..storage.automation_store import Automation
from ..storage.paging import page_query, page_shown
from ..web.body import parse_body
from .automation_models import AutomationCreate, AutomationUpdate
from .automations import automation_object, checked_target, create, invocation_object, manual, no_automation, paused, resumed, updated
from .needs import needs_of


async def create_automation(request: Request) -> Response:
    services = needs_of(request)
    body = await parse_body(request, AutomationCreate, services.config.server.body_limits())
    tenant = tenant_of(request)
    target = await checked_target(services, tenant, body.target)
    automation = await create(services, tenant, body, {"type": "developer"}, target)
    services.scheduler.wake()
    return JSONResponse(automation_object(automation))


async def list_automations(request: Request) -> Response:
    services, query = needs_of(request), page_query(request)
    found = await services.automations.automations(tenant_of(request), request.query_params.get("session_id"), query)
    return JSONResponse(page_shown(found, query, automation_object))


async def retrieve_automation(request: Request) -> Response:
    return JSONResponse(automation_object(await _automation(request)))


async def update_automation(request: Request) -> Response:
    services = needs_of(request)
    change = await parse_body(request, AutomationUpdate, services.config.server.body_limits())
    tenant, automation_id = tenant_of(request), request.path_params["automation_id"]
    target = await checked_target(services, tenant, change.target) if change.target is not None else None
    now = time.time()
    automation = await services.automations.change(automation_id, tenant, lambda kept: updated(kept, change, target, now))
    if automation is None:
        raise no_automation(automation_id)
    services.scheduler.wake()
    return JSONResponse(automation_object(automation))


async def delete_automation(request: Request) -> Response:
    services, automation_id = needs_of(request), request.path_params["automation_id"]
    if not await services.automations.delete(automation_id, tenant_of(request)):
        raise no_automation(automation_id)
    return JSONResponse({"id": automation_id, "object": "agent.automation.deleted", "deleted": True})


async def pause_automation(request: Request) -> Response:
    services, automation_id = needs_of(request), request.path_params["automation_id"]
    automation = await services.automations.change(automation_id, tenant_of(request), paused)
    if automation is None:
        raise no_automation(automation_id)
    return JSONResponse(automation_object(automation))


async def resume_automation(request: Request) -> Response:
    services, automation_id = needs_of(request), request.path_params["automation_id"]
    now = time.time()
    automation = await services.automations.change(automation_id, tenant_of(request), lambda kept: resumed(kept, now))
    if automation is None:
        raise no_automation(automation_id)
    services.scheduler.wake()
    return JSONResponse(automation_object(automation))


async def _automation(request: Request) -> Automation:
    automation_id = request.path_params["automation_id"]
    found = await needs_of(request).automations.automation(automation_id, tenant_of(request))
    if found is None:
        raise no_automation(automation_id)
    return found


# Invocations


async def create_invocation(request: Request) -> Response:
    services = needs_of(request)
    refuse_while_draining(services.drain)
    automation = await _automation(request)
    invocation = manual(automation)
    await services.automations.invoke(invocation)
    services.scheduler.wake()
    return JSONResponse(invocation_object(invocation, automation))


async def list_invocations(request: Request) -> Response:
    services, query = needs_of(request), page_query(request)
    automation = await _automation(request)
    found = await services.automations.invocations(automation.id, query)
    return JSONResponse(page_shown(found, query, lambda invocation: invocation_object(invocation, automation)))


async def retrieve_invocation(request: Request) -> Response:
    automation = await _automation(request)
    invocation_id = request.path_params["invocation_id"]
    found = await needs_of(request).automations.invocation(automation.id, invocation_id, automation.tenant)
    if found is None:
        raise not_found(f"No invocation found with id '{invocation_id}'.", param="invocation_id")
    return JSONResponse(invocation_object(found, automation))


routes = [
    Route("/v1/agents/automations", create_automation, methods=["POST"]),
    Route("/v1/agents/automations", list_automations, methods=["GET"]),
    Route("/v1/agents/automations/{automation_id}", retrieve_automation, methods=["GET"]),
    Route("/v1/agents/automations/{automation_id}", update_automation, methods=["POST"]),
    Route("/v1/agents/automations/{automation_id}", delete_automation, methods=["DELETE"]),
    Route("/v1/agents/automations/{automation_id}/pause", pause_automation, methods=["POST"]),
    Route("/v1/agents/automations/{automation_id}/resume", resume_automation, methods=["POST"]),
    Route("/v1/agents/automations/{automation_id}/invocations", create_invocation, methods=["POST"]),
    Route("/v1/agents/automations/{automation_id}/invocations", list_invocations, methods=["GET"]),
    Route("/v1/agents/automations/{automation_id}/invocations/{invocation_id}", retrieve_invocation, methods=["GET"]),
]
