"""HTTP endpoints of the Containers API: containers (each one a python session of the sandbox, started
when code first runs in it and ended when it expires) and their files under /mnt/data."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..core.ids import new_id
from ..core.models import StrictModel
from ..core.requests import tenant_of
from ..errors import bad_request, not_found
from ..jsontext import JSONResponse
from ..storage.file_store import ContainerFile
from ..storage.paging import page_of, page_query
from ..web.body import parse_body
from .needs import needs_of
from .network import NetworkPolicy, checked_policy
from .routes import download, files_of
from .service import check_memory_limit

MAX_FILE_IDS = 100


class ExpiresAfter(StrictModel):
    anchor: Literal["last_active_at"]
    minutes: int = Field(ge=1)


class CreateContainer(StrictModel):
    name: str = Field(min_length=1, max_length=256)
    expires_after: ExpiresAfter | None = None
    file_ids: list[str] = Field([], max_length=MAX_FILE_IDS)
    memory_limit: Literal["1g", "4g", "16g", "64g"] | None = None
    network_policy: NetworkPolicy | None = None


class AddFile(StrictModel):
    file_id: str


async def create_container(request: Request) -> Response:
    services = needs_of(request)
    files, sandbox = services.files, services.sandbox
    body = await parse_body(request, CreateContainer, services.config.server.body_limits())
    if sandbox is None:
        raise bad_request("Containers need the code_interpreter sandbox, which this gateway does not have.")
    tenant = tenant_of(request)
    minutes = body.expires_after.minutes if body.expires_after else None
    if minutes is not None and minutes > files.config.max_container_idle_minutes:
        raise bad_request(
            f"expires_after.minutes may be {files.config.max_container_idle_minutes} at most on this gateway.", param="expires_after.minutes"
        )
    check_memory_limit(body.memory_limit, sandbox.config.memory, "memory_limit")
    network = checked_policy(body.network_policy, sandbox.config.network, "network_policy")
    uploads = [await files.file(file_id, tenant, param=f"file_ids[{index}]") for index, file_id in enumerate(body.file_ids)]
    container = await files.new_container(tenant, body.name, minutes, body.memory_limit or sandbox.config.memory, network=network)
    try:
        for index, upload in enumerate(uploads):
            await files.copy_into(container, upload, param=f"file_ids[{index}]")
    except BaseException:
        await files.delete_container(container.id, tenant)
        raise
    return JSONResponse(container.as_dict())


async def list_containers(request: Request) -> Response:
    query = page_query(request)
    found = await files_of(request).store.list_containers(tenant_of(request), query)
    return JSONResponse(page_of(found, query))


async def retrieve_container(request: Request) -> Response:
    container_id = request.path_params["container_id"]
    found = await files_of(request).store.get_container(container_id, tenant_of(request))
    if found is None:
        raise not_found(f"Container '{container_id}' not found.")
    return JSONResponse(found.as_dict())


async def delete_container(request: Request) -> Response:
    services = needs_of(request)
    container_id, tenant = request.path_params["container_id"], tenant_of(request)
    if not await services.files.delete_container(container_id, tenant):
        raise not_found(f"Container '{container_id}' not found.")
    if services.sandbox is not None:
        await services.sandbox.end(container_id, tenant)
    return JSONResponse({"id": container_id, "object": "container.deleted", "deleted": True})


async def create_container_file(request: Request) -> Response:
    services = needs_of(request)
    files, tenant = services.files, tenant_of(request)
    container = await files.container(request.path_params["container_id"], tenant)
    if request.headers.get("content-type", "").lower().startswith("multipart/"):
        upload = await files.receive(request, tenant)
        blob = await upload.commit("file")
        assert upload.file is not None
        record = ContainerFile(new_id("cfile"), container.id, tenant, upload.filename, upload.file.size, "user", int(time.time()), blob)
        added = await files.put(record, param="file")
    else:
        body = await parse_body(request, AddFile, services.config.server.body_limits())
        added = await files.copy_into(container, await files.file(body.file_id, tenant, param="file_id"), param="file_id")
    await files.store.touch_container(container.id)
    return JSONResponse(added.as_dict())


async def _container_file(request: Request) -> ContainerFile:
    files, tenant = files_of(request), tenant_of(request)
    container = await files.container(request.path_params["container_id"], tenant)
    file_id = request.path_params["file_id"]
    found = await files.store.get_container_file(container.id, file_id, tenant)
    if found is None:
        raise not_found(f"No file '{file_id}' in container '{container.id}'.")
    return found


async def list_container_files(request: Request) -> Response:
    files = files_of(request)
    container = await files.container(request.path_params["container_id"], tenant_of(request))
    query = page_query(request)
    found = await files.store.list_container_files(container.id, query)
    return JSONResponse(page_of(found, query))


async def retrieve_container_file(request: Request) -> Response:
    return JSONResponse((await _container_file(request)).as_dict())


async def container_file_content(request: Request) -> Response:
    found = await _container_file(request)
    return await download(files_of(request), found.blob, found.filename)


async def delete_container_file(request: Request) -> Response:
    files = files_of(request)
    found = await _container_file(request)
    removed = await files.store.delete_container_file(found.container_id, found.id, found.tenant)
    if removed is not None:
        await files.blobs.remove(removed.blob)
    return JSONResponse({"id": found.id, "object": "container.file.deleted", "deleted": True})


routes = [
    Route("/v1/containers", create_container, methods=["POST"]),
    Route("/v1/containers", list_containers, methods=["GET"]),
    Route("/v1/containers/{container_id}", retrieve_container, methods=["GET"]),
    Route("/v1/containers/{container_id}", delete_container, methods=["DELETE"]),
    Route("/v1/containers/{container_id}/files", create_container_file, methods=["POST"]),
    Route("/v1/containers/{container_id}/files", list_container_files, methods=["GET"]),
    Route("/v1/containers/{container_id}/files/{file_id}", retrieve_container_file, methods=["GET"]),
    Route("/v1/containers/{container_id}/files/{file_id}", delete_container_file, methods=["DELETE"]),
    Route("/v1/containers/{container_id}/files/{file_id}/content", container_file_content, methods=["GET"]),
]
