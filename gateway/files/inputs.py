"""`input_file` content parts made into text the model reads: plain text, CSV, JSON, Markdown and the
like as they are, PDFs through pypdf's text extraction. gpt-oss reads text only: any other file is a 400.

A file comes from an upload (`file_id`) or inline (`file_data`, base64 or a data URL). Its text is
bounded, and decoding and extraction run off the event loop.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any, Iterable

import anyio.to_thread
from pypdf import PdfReader

from ..cpu import run_cpu
from ..errors import APIError, bad_request
from .service import FileService

TEXT_SUFFIXES = {
    ".txt", ".text", ".csv", ".tsv", ".json", ".jsonl", ".md", ".markdown", ".xml", ".yaml", ".yml", ".log",
    ".py", ".js", ".ts", ".html", ".htm", ".css", ".sql", ".ini", ".toml", ".rst", ".tex",
}  # fmt: skip
MAX_PDF_PAGES = 1000


def input_file_parts(items: Iterable[Any], field: str) -> list[tuple[Any, str]]:
    """The `input_file` parts of the items in `field` (input, items), with the parameter that names each."""
    found = []
    for index, item in enumerate(items):
        content = getattr(item, "content", None)
        if isinstance(content, list):
            for position, part in enumerate(content):
                if getattr(part, "type", None) == "input_file":
                    found.append((part, f"{field}[{index}].content[{position}]"))
    return found


async def read_input_files(items: Iterable[Any], files: FileService, tenant: str, field: str = "input") -> None:
    """Give every `input_file` part of `items` its text (`part.resolve`), or raise a 4xx naming the part."""
    for part, param in input_file_parts(items, field):
        if part.file_url is not None:
            raise bad_request("file_url is not supported: upload the file (POST /v1/files) and pass its file_id.", param=f"{param}.file_url")
        if (part.file_id is None) == (part.file_data is None):
            raise bad_request("An input_file needs exactly one of file_id and file_data.", param=param)
        if part.file_id is not None:
            stored = await files.file(part.file_id, tenant, param=f"{param}.file_id")
            name = part.filename or stored.filename
            data = await anyio.to_thread.run_sync(files.blobs.path(stored.blob).read_bytes)
        else:
            name = part.filename or "file"
            data = await run_cpu(_inline_bytes, part.file_data, param)
        text = await run_cpu(file_text, name, data, files.config.max_input_file_chars, param)
        part.resolve(f"[file {name}]\n{text}\n[end of file {name}]")


def _inline_bytes(file_data: str, param: str) -> bytes:
    encoded = file_data.split(",", 1)[1] if file_data.startswith("data:") and "," in file_data else file_data
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request("file_data must be base64 (or a base64 data URL).", param=f"{param}.file_data") from None


def file_text(name: str, data: bytes, max_chars: int, param: str) -> str:
    """The text of a file for the model; a 400 for a file that has none the gateway can read."""
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if data.startswith(b"%PDF-"):
        text = _pdf_text(data, param)
    elif suffix in TEXT_SUFFIXES or not suffix:
        if b"\0" in data:
            raise _unreadable(name, param)
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise _unreadable(name, param) from None
    else:
        raise _unreadable(name, param)
    if len(text) > max_chars:
        raise APIError(
            400, f"The text of '{name}' is {len(text)} characters; this gateway gives the model {max_chars} at most per file.",
            param=param, code="file_too_large",
        )  # fmt: skip
    return text


def _pdf_text(data: bytes, param: str) -> str:
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = len(reader.pages)
        if pages <= MAX_PDF_PAGES:
            return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()
    except Exception as exc:  # a hostile PDF may break the parser in any way: it is the client's file that is bad
        raise bad_request(f"The PDF could not be read ({type(exc).__name__}).", param=param) from None
    raise bad_request(f"The PDF has {pages} pages; {MAX_PDF_PAGES} at most are read.", param=param)


def _unreadable(name: str, param: str) -> APIError:
    return APIError(
        400,
        f"'{name[:100]}' is not a file the model can read: gpt-oss reads text only (plain text, CSV, JSON, Markdown, "
        "PDF and other text formats, UTF-8).",
        param=param, code="unsupported_file",
    )  # fmt: skip
