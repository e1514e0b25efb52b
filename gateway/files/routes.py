"""HTTP endpoints of the Files API: upload (multipart, streamed to disk), list, retrieve, content, delete."""

from __future__ import annotations

import time
from typing import AsyncIterator
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from runtime.numbers import decimal

from ..core.ids import new_id
from ..core.requests import tenant_of
from ..errors import bad_request
from ..jsontext import JSONResponse
from ..storage.file_store import QuotaExceeded, StoredFile, TooMany
from ..storage.paging import page_of, page_query
from .needs import needs_of
from .service import FileService

# Purposes a file can be uploaded for here: input to the model and to code_interpreter containers. The
# others (batch, fine-tune, vision, evals) belong to APIs this gateway does not have.
PURPOSES = ("user_data", "assistants")
MIN_EXPIRY_S, MAX_EXPIRY_S = 3600, 30 * 24 * 3600


def files_of(request: Request) -> FileService:
    return needs_of(request).files


async def create_file(request: Request) -> Response:
    files = files_of(request)
    config = files.config
    upload = await files.receive(request, tenant_of(request))
    try:
        purpose = upload.fields.pop("purpose", None)
        if purpose is None:
            raise bad_request("Missing required parameter: 'purpose'.", param="purpose", code="missing_required_parameter")
        if purpose not in PURPOSES:
            raise bad_request(f"Invalid value for 'purpose': this gateway keeps files for {' and '.join(PURPOSES)} only.", param="purpose")
        expires_at = _expires_at(upload.fields)
    except BaseException:
        await upload.discard()
        raise
    blob = await upload.commit("file")
    assert upload.file is not None
    stored = StoredFile(new_id("file"), tenant_of(request), upload.filename, purpose, upload.file.size, int(time.time()), expires_at, blob)
    try:
        await files.store.add_file(stored, config.tenant_quota_bytes, config.max_files_per_tenant)
    except QuotaExceeded:
        await files.blobs.remove(blob)
        raise files.quota_exceeded("file") from None
    except TooMany as exc:
        await files.blobs.remove(blob)
        raise files.too_many(exc) from None
    except BaseException:
        await files.blobs.remove(blob)
        raise
    return JSONResponse(stored.as_dict())


def _expires_at(fields: dict[str, str]) -> int | None:
    """`expires_after[anchor]=created_at` and `expires_after[seconds]=N`, as the SDK sends them in a form."""
    anchor, seconds = fields.pop("expires_after[anchor]", None), fields.pop("expires_after[seconds]", None)
    if anchor is None and seconds is None:
        return None
    if anchor != "created_at":
        raise bad_request("expires_after.anchor must be 'created_at'.", param="expires_after.anchor")
    count = decimal(seconds)
    if count is None or not MIN_EXPIRY_S <= count <= MAX_EXPIRY_S:
        raise bad_request(f"expires_after.seconds must be an integer from {MIN_EXPIRY_S} to {MAX_EXPIRY_S}.", param="expires_after.seconds")
    return int(time.time()) + count


async def list_files(request: Request) -> Response:
    files = files_of(request)
    query = page_query(request, default=10000, maximum=10000)
    purpose = request.query_params.get("purpose")
    found = await files.store.list_files(tenant_of(request), query, purpose)
    return JSONResponse(page_of(found, query))


async def retrieve_file(request: Request) -> Response:
    file = await files_of(request).file(request.path_params["file_id"], tenant_of(request))
    return JSONResponse(file.as_dict())


async def file_content(request: Request) -> Response:
    files = files_of(request)
    file = await files.file(request.path_params["file_id"], tenant_of(request))
    return await download(files, file.blob, file.filename)


async def download(files: FileService, blob: str, filename: str) -> Response:
    """A blob's bytes, streamed as the client takes them, as a download named `filename`."""
    reader = await files.blobs.open(blob)

    async def body() -> AsyncIterator[bytes]:
        async with reader:
            async for chunk in reader.chunks():
                yield chunk

    headers = {"content-length": str(reader.size), "content-disposition": attachment(filename)}
    return StreamingResponse(body(), media_type="application/octet-stream", headers=headers)


def attachment(filename: str) -> str:
    """A Content-Disposition naming `filename` (RFC 6266): its UTF-8 form percent-encoded, and an ASCII
    form for clients that read only `filename`."""
    fallback = "".join(char if " " <= char <= "~" and char not in '"\\' else "_" for char in filename)
    encoded = quote(filename, safe="")
    if encoded == filename:
        return f'attachment; filename="{filename}"'
    return f"attachment; filename=\"{fallback}\"; filename*=utf-8''{encoded}"


async def delete_file(request: Request) -> Response:
    files = files_of(request)
    file_id = request.path_params["file_id"]
    removed = await files.store.delete_file(file_id, tenant_of(request))
    if removed is None:
        await files.file(file_id, tenant_of(request))  # the 404
    else:
        await files.blobs.remove(removed.blob)
    return JSONResponse({"id": file_id, "object": "file", "deleted": True})


routes = [
    Route("/v1/files", create_file, methods=["POST"]),
    Route("/v1/files", list_files, methods=["GET"]),
    Route("/v1/files/{file_id}", retrieve_file, methods=["GET"]),
    Route("/v1/files/{file_id}", delete_file, methods=["DELETE"]),
    Route("/v1/files/{file_id}/content", file_content, methods=["GET"]),
]
