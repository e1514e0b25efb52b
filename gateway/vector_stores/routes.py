"""HTTP endpoints of the Vector Stores API (`openai/resources/vector_stores/`): stores, their files, file
batches, and search."""

from __future__ import annotations

import time
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..config import GatewayConfig
from ..core.ids import new_id
from ..core.requests import NeedsOf, tenant_of
from ..errors import bad_request, not_found
from ..jsontext import JSONResponse
from ..storage.file_store import TooMany
from ..storage.paging import page_of, page_query
from ..storage.vector_store_store import STATUSES, FileBatch, StoreFile, VectorStore
from ..web.body import parse_body
from .filters import FilterError, attribute_rows
from .models import CreateFileBatch, CreateStoreFile, CreateVectorStore, SearchVectorStore, UpdateStoreFile, UpdateVectorStore, ranking_of
from .service import VectorStoreService


class VectorStoresNeeds(Protocol):
    config: GatewayConfig
    vector_stores: VectorStoreService


needs_of = NeedsOf[VectorStoresNeeds]()


def service_of(request: Request) -> VectorStoreService:
    return needs_of(request).vector_stores


async def _body(request: Request, model: type[Any]) -> Any:
    return await parse_body(request, model, needs_of(request).config.server.body_limits())


async def _store(request: Request) -> VectorStore:
    return await service_of(request).vector_store(request.path_params["vector_store_id"], tenant_of(request))


# -- stores ------------------------------------------------------------------------------------------------


async def create_store(request: Request) -> Response:
    body: CreateVectorStore = await _body(request, CreateVectorStore)
    service, tenant, now = service_of(request), tenant_of(request), int(time.time())
    for index, file_id in enumerate(body.file_ids or []):
        await service.files.file(file_id, tenant, param=f"file_ids[{index}]")  # before the store exists
    days = body.expires_after.days if body.expires_after is not None else None
    store = VectorStore(new_id("vs"), tenant, body.name or "", body.description, now, now, body.metadata or {}, days)
    try:
        await service.store.create(store, service.config.max_stores_per_tenant)
    except TooMany as exc:
        raise service.files.too_many(exc) from None
    entries = [CreateStoreFile(file_id=file_id, chunking_strategy=body.chunking_strategy) for file_id in body.file_ids or []]
    await service.add_files(store, entries, "file_ids")
    return JSONResponse((await service.vector_store(store.id, tenant)).as_dict())


async def list_stores(request: Request) -> Response:
    query = page_query(request)
    return JSONResponse(page_of(await service_of(request).store.list_stores(tenant_of(request), query), query))


async def retrieve_store(request: Request) -> Response:
    return JSONResponse((await _store(request)).as_dict())


async def update_store(request: Request) -> Response:
    body: UpdateVectorStore = await _body(request, UpdateVectorStore)
    store = await _store(request)
    changes: dict[str, Any] = {}
    if "name" in body.model_fields_set and body.name is not None:
        changes["name"] = body.name
    if "metadata" in body.model_fields_set:
        changes["metadata"] = body.metadata or {}
    if "expires_after" in body.model_fields_set:
        changes["expires_days"] = body.expires_after.days if body.expires_after is not None else None
    service = service_of(request)
    await service.store.update(store.id, store.tenant, changes)
    return JSONResponse((await service.vector_store(store.id, store.tenant)).as_dict())


async def delete_store(request: Request) -> Response:
    store_id = request.path_params["vector_store_id"]
    if not await service_of(request).store.delete(store_id, tenant_of(request)):
        raise not_found(f"No vector store found with id '{store_id}'.")
    return JSONResponse({"id": store_id, "object": "vector_store.deleted", "deleted": True})


async def search_store(request: Request) -> Response:
    body: SearchVectorStore = await _body(request, SearchVectorStore)
    store = await _store(request)
    service = service_of(request)
    if store.expired():
        raise bad_request(f"Vector store '{store.id}' has expired and can no longer be searched.")
    queries = body.queries()
    found = await service.search([store], queries, body.filters, body.max_num_results, ranking_of(body.ranking_options))
    data = [
        {
            "file_id": each.chunk.file_id,
            "filename": each.chunk.filename,
            "score": each.score,
            "attributes": each.chunk.attributes,
            "content": [{"type": "text", "text": each.chunk.text}],
        }
        for each in found
    ]
    return JSONResponse({"object": "vector_store.search_results.page", "search_query": queries, "data": data, "has_more": False, "next_page": None})


# -- files -------------------------------------------------------------------------------------------------


async def create_file(request: Request) -> Response:
    body: CreateStoreFile = await _body(request, CreateStoreFile)
    store = await _store(request)
    added = await service_of(request).add_files(store, [body], "file_id")
    return JSONResponse(added[0].as_dict())


async def _file(request: Request) -> StoreFile:
    store = await _store(request)
    file_id = request.path_params["file_id"]
    found = await service_of(request).store.file(store.id, file_id, store.tenant)
    if found is None:
        raise not_found(f"No file found with id '{file_id}' in vector store '{store.id}'.")
    return found


async def list_files(request: Request) -> Response:
    store = await _store(request)
    return await _files_page(request, store.id, None)


async def _files_page(request: Request, store_id: str, batch_id: str | None) -> Response:
    query = page_query(request)
    status = request.query_params.get("filter")
    if status is not None and status not in STATUSES:
        raise bad_request(f"filter must be one of {', '.join(STATUSES)}.", param="filter")
    return JSONResponse(page_of(await service_of(request).store.files(store_id, query, status, batch_id), query))


async def retrieve_file(request: Request) -> Response:
    return JSONResponse((await _file(request)).as_dict())


async def update_file(request: Request) -> Response:
    body: UpdateStoreFile = await _body(request, UpdateStoreFile)
    file = await _file(request)
    try:
        rows = attribute_rows(body.attributes, "attributes")
    except FilterError as exc:
        raise bad_request(f"Invalid attributes: {exc}.", param="attributes") from None
    file.attributes = body.attributes or {}
    await service_of(request).store.set_attributes(file, rows)
    return JSONResponse(file.as_dict())


async def delete_file(request: Request) -> Response:
    file = await _file(request)
    await service_of(request).store.remove_file(file.vector_store_id, file.id, file.tenant)
    return JSONResponse({"id": file.id, "object": "vector_store.file.deleted", "deleted": True})


async def file_content(request: Request) -> Response:
    file = await _file(request)
    assert file.seq is not None
    texts = await service_of(request).index.text(file.seq)
    data = [{"type": "text", "text": text} for text in texts]
    return JSONResponse({"object": "vector_store.file_content.page", "data": data, "has_more": False, "next_page": None})


# -- batches -----------------------------------------------------------------------------------------------


async def create_batch(request: Request) -> Response:
    body: CreateFileBatch = await _body(request, CreateFileBatch)
    store = await _store(request)
    service = service_of(request)
    batch = FileBatch(new_id("vsfb"), store.id, store.tenant, int(time.time()), False)
    await service.store.create_batch(batch)
    try:
        await service.add_files(store, body.entries(), "files" if body.files is not None else "file_ids", batch.id)
    except BaseException:
        await service.store.delete_batch(batch.id)
        raise
    return JSONResponse((await _batch(request, batch.id)).as_dict())


async def _batch(request: Request, batch_id: str | None = None) -> FileBatch:
    store = await _store(request)
    batch_id = batch_id or request.path_params["batch_id"]
    found = await service_of(request).store.batch(store.id, batch_id, store.tenant)
    if found is None:
        raise not_found(f"No file batch found with id '{batch_id}' in vector store '{store.id}'.")
    return found


async def retrieve_batch(request: Request) -> Response:
    return JSONResponse((await _batch(request)).as_dict())


async def cancel_batch(request: Request) -> Response:
    batch = await _batch(request)
    await service_of(request).store.cancel_batch(batch.id)
    return JSONResponse((await _batch(request)).as_dict())


async def list_batch_files(request: Request) -> Response:
    batch = await _batch(request)
    return await _files_page(request, batch.vector_store_id, batch.id)


_STORE = "/v1/vector_stores/{vector_store_id}"
routes = [
    Route("/v1/vector_stores", create_store, methods=["POST"]),
    Route("/v1/vector_stores", list_stores, methods=["GET"]),
    Route(_STORE, retrieve_store, methods=["GET"]),
    Route(_STORE, update_store, methods=["POST"]),
    Route(_STORE, delete_store, methods=["DELETE"]),
    Route(f"{_STORE}/search", search_store, methods=["POST"]),
    Route(f"{_STORE}/files", create_file, methods=["POST"]),
    Route(f"{_STORE}/files", list_files, methods=["GET"]),
    Route(f"{_STORE}/files/{{file_id}}", retrieve_file, methods=["GET"]),
    Route(f"{_STORE}/files/{{file_id}}", update_file, methods=["POST"]),
    Route(f"{_STORE}/files/{{file_id}}", delete_file, methods=["DELETE"]),
    Route(f"{_STORE}/files/{{file_id}}/content", file_content, methods=["GET"]),
    Route(f"{_STORE}/file_batches", create_batch, methods=["POST"]),
    Route(f"{_STORE}/file_batches/{{batch_id}}", retrieve_batch, methods=["GET"]),
    Route(f"{_STORE}/file_batches/{{batch_id}}/cancel", cancel_batch, methods=["POST"]),
    Route(f"{_STORE}/file_batches/{{batch_id}}/files", list_batch_files, methods=["GET"]),
]
