"""A multipart/form-data upload, parsed as it arrives (python-multipart's streaming parser): the file's
bytes go straight to a blob, bounded while they stream, and the form's other fields are small and few.

Starlette's own form parsing spools a file to a temporary file with no size limit; this one refuses an
upload at the byte that passes the limit, and removes what it wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import anyio
from python_multipart.exceptions import FormParserError, MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from runtime.numbers import decimal

from ..errors import APIError, bad_request
from .blobs import Blobs, BlobWriter

MAX_FIELDS = 16
MAX_FIELD_BYTES = 4096
MAX_FILENAME_CHARS = 255


@dataclass
class Upload:
    fields: dict[str, str] = field(default_factory=dict)
    file: BlobWriter | None = None  # committed by the caller once the upload is accepted
    filename: str = ""

    async def discard(self) -> None:
        if self.file is not None:
            await self.file.abort()

    async def commit(self, file_field: str) -> str:
        """The file, made readable once the form is known to be complete: every field was taken (popped
        from `fields`) and the file is there. Otherwise a 400 naming what is wrong, and nothing is kept."""
        try:
            if self.fields:
                name = next(iter(self.fields))[:100]
                raise bad_request(f"Unknown parameter: '{name}'.", param=name, code="unknown_parameter")
            if self.file is None:
                raise bad_request(f"Missing required parameter: '{file_field}'.", param=file_field, code="missing_required_parameter")
            return await self.file.commit()
        except BaseException:
            await self.discard()
            raise


@dataclass
class _Part:
    headers: dict[bytes, bytes] = field(default_factory=dict)
    name: str = ""
    filename: str | None = None
    value: bytearray = field(default_factory=bytearray)

    def add_header(self, data: bytes) -> None:
        name, _, value = data.partition(b"\0")
        self.headers[name] = value

    def read_disposition(self) -> None:
        """Its name and file name, from its Content-Disposition (once all its headers are in)."""
        _, options = parse_options_header(self.headers.get(b"content-disposition", b""))
        self.name = options.get(b"name", b"").decode("utf-8", "replace")
        filename = options.get(b"filename")
        self.filename = filename.decode("utf-8", "replace") if filename is not None else None


class _Collector:
    """The parser's callbacks, which run synchronously inside `write()`: events are gathered here and
    acted on (asynchronously) once `write()` returns."""

    def __init__(self) -> None:
        self.events: list[tuple[str, bytes]] = []
        self._field = b""
        self._value = b""

    def callbacks(self) -> dict[str, Callable[..., None]]:
        return {
            "on_part_begin": lambda: self.events.append(("begin", b"")),
            "on_header_field": lambda data, start, end: self._add_field(data[start:end]),
            "on_header_value": lambda data, start, end: self._add_value(data[start:end]),
            "on_header_end": self._header_end,
            "on_headers_finished": lambda: self.events.append(("headers", b"")),
            "on_part_data": lambda data, start, end: self.events.append(("data", bytes(data[start:end]))),
            "on_part_end": lambda: self.events.append(("end", b"")),
        }

    def _add_field(self, data: bytes) -> None:
        self._field += data

    def _add_value(self, data: bytes) -> None:
        self._value += data

    def _header_end(self) -> None:
        self.events.append(("header", self._field.lower() + b"\0" + self._value))
        self._field, self._value = b"", b""


async def read_upload(
    request: Request, blobs: Blobs, file_field: str, max_bytes: int, idle_timeout_s: float, room: Callable[[int], bool], over_quota: APIError
) -> Upload:
    """The form's fields, and its one file (named `file_field`) written to a blob as it streams. Raises a
    4xx APIError for a malformed form, a second file, a file larger than `max_bytes`, or `over_quota` when
    `room(more bytes)` says they do not fit."""
    content_type, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise APIError(415, "Send the file as multipart/form-data.", code="unsupported_media_type")
    too_large = APIError(413, f"The file is larger than this gateway's limit of {max_bytes} bytes.", param=file_field, code="file_too_large")
    declared = request.headers.get("content-length", "")
    if (decimal(declared) or 0) > max_bytes + 64 * 1024:
        raise too_large
    collector = _Collector()
    try:
        parser = MultipartParser(boundary, collector.callbacks())  # type: ignore[arg-type]
    except FormParserError as exc:  # a boundary the parser does not take (over 256 characters)
        raise bad_request(f"The multipart body is malformed: {exc}.") from None
    upload, part = Upload(), _Part()
    counted = 0  # the file's bytes passed to `room`
    try:
        stream = request.stream().__aiter__()
        while True:
            with anyio.fail_after(idle_timeout_s):
                chunk = await anext(stream, None)
            if chunk is None:
                break
            try:
                parser.write(chunk)
            except MultipartParseError as exc:
                raise bad_request(f"The multipart body is malformed: {exc}.") from None
            part = await _apply(collector, upload, part, file_field, blobs, max_bytes, too_large)
            if upload.file is not None and upload.file.size > counted:
                counted, adding = upload.file.size, upload.file.size - counted
                if not room(adding):
                    raise over_quota
        parser.finalize()
        if collector.events or part.name:
            raise bad_request("The multipart body ended in the middle of a part.")
    except TimeoutError:
        await upload.discard()
        raise APIError(408, "The upload stopped sending data.", code="request_timeout") from None
    except BaseException:
        await upload.discard()
        raise
    return upload


async def _apply(collector: _Collector, upload: Upload, part: _Part, file_field: str, blobs: Blobs, max_bytes: int, too_large: APIError) -> _Part:
    events, collector.events = collector.events, []
    for kind, data in events:
        if kind == "begin":
            part = _Part()
            if len(upload.fields) >= MAX_FIELDS:
                raise bad_request("The form has too many fields.")
        elif kind == "header":
            part.add_header(data)
        elif kind == "headers":
            part.read_disposition()
            if part.name == file_field:
                if upload.file is not None:
                    raise bad_request(f"The form has more than one '{file_field}'.", param=file_field)
                upload.file = blobs.writer()
                upload.filename = (part.filename or "upload").replace("/", "_").replace("\\", "_")[:MAX_FILENAME_CHARS]
        elif kind == "data":
            if part.name == file_field:
                assert upload.file is not None
                if upload.file.size + len(data) > max_bytes:
                    raise too_large
                await upload.file.write(data)
            else:
                part.value += data
                if len(part.value) > MAX_FIELD_BYTES:
                    raise bad_request(f"The form field '{part.name[:100]}' is too long.", param=part.name[:100])
        else:  # end of the part
            if part.name != file_field:
                try:
                    upload.fields[part.name] = part.value.decode()
                except UnicodeDecodeError:
                    raise bad_request(f"The form field '{part.name[:100]}' is not UTF-8.", param=part.name[:100]) from None
            part = _Part()
    return part


@dataclass
class SmallForm:
    """A form read whole into memory (a skill's files): its fields and its files, in order."""

    fields: dict[str, str] = field(default_factory=dict)
    files: list[tuple[str, str, bytes]] = field(default_factory=list)  # field name, file name as sent, content


async def read_small_form(request: Request, max_bytes: int, max_files: int, idle_timeout_s: float) -> SmallForm:
    """A multipart form of at most `max_bytes` in all and `max_files` files, read into memory; a 4xx
    APIError when it is malformed or larger. File names are kept as sent (paths of a directory upload)."""
    content_type, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise APIError(415, "Send the files as multipart/form-data.", code="unsupported_media_type")
    too_large = APIError(413, f"The upload is larger than this gateway's limit of {max_bytes} bytes.", code="file_too_large")
    if (decimal(request.headers.get("content-length", "")) or 0) > max_bytes:
        raise too_large
    collector, form, part, received = _Collector(), SmallForm(), _Part(), 0
    try:
        parser = MultipartParser(boundary, collector.callbacks())  # type: ignore[arg-type]
    except FormParserError as exc:
        raise bad_request(f"The multipart body is malformed: {exc}.") from None
    stream = request.stream().__aiter__()
    try:
        while True:
            with anyio.fail_after(idle_timeout_s):
                chunk = await anext(stream, None)
            if chunk is None:
                break
            received += len(chunk)
            if received > max_bytes:
                raise too_large
            try:
                parser.write(chunk)
            except MultipartParseError as exc:
                raise bad_request(f"The multipart body is malformed: {exc}.") from None
            events, collector.events = collector.events, []
            for kind, data in events:
                part = _small_form_event(form, part, kind, data, max_files)
        parser.finalize()
    except TimeoutError:
        raise APIError(408, "The upload stopped sending data.", code="request_timeout") from None
    if collector.events or part.name:
        raise bad_request("The multipart body ended in the middle of a part.")
    return form


def _small_form_event(form: SmallForm, part: _Part, kind: str, data: bytes, max_files: int) -> _Part:
    if kind == "begin":
        if len(form.fields) + len(form.files) >= MAX_FIELDS + max_files:
            raise bad_request("The form has too many parts.")
        return _Part()
    if kind == "header":
        part.add_header(data)
    elif kind == "headers":
        part.read_disposition()
    elif kind == "data":
        part.value += data
        if part.filename is None and len(part.value) > MAX_FIELD_BYTES:
            raise bad_request(f"The form field '{part.name[:100]}' is too long.", param=part.name[:100])
    else:  # end of the part
        if part.filename is not None:
            if len(form.files) >= max_files:
                raise bad_request(f"The form has more than {max_files} files.")
            form.files.append((part.name, part.filename, bytes(part.value)))
        else:
            try:
                form.fields[part.name] = part.value.decode()
            except UnicodeDecodeError:
                raise bad_request(f"The form field '{part.name[:100]}' is not UTF-8.", param=part.name[:100]) from None
        return _Part()
    return part
