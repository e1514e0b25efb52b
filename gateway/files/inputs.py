"""`input_file` content parts made into text the model reads: plain text, CSV, JSON, Markdown and the
like as they are, PDFs through pypdf's text extraction. gpt-oss reads text only: any other file is a 400.

A file comes from an upload (`file_id`) or inline (`file_data`, base64 or a data URL). A stored file is
refused by its size before it is read. A PDF's text is extracted in a worker process (isolation.py): a
small PDF can draw one huge content stream on every page, and its cost must be bounded and stoppable.
"""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass
from typing import Any, Iterable

from pypdf import PdfReader

from runtime.cpu import run_cpu
from runtime.isolation import TooCostly, run_isolated

from ..errors import APIError, bad_request
from .blobs import Blobs
from .service import FileService

TEXT_SUFFIXES = {
    ".txt", ".text", ".csv", ".tsv", ".json", ".jsonl", ".md", ".markdown", ".xml", ".yaml", ".yml", ".log",
    ".py", ".js", ".ts", ".html", ".htm", ".css", ".sql", ".ini", ".toml", ".rst", ".tex",
}  # fmt: skip
MAX_PDF_PAGES = 1000


def input_file_parts(items: Iterable[Any], field: str) -> list[tuple[Any, str]]:
    """The `input_file` parts of the items in `field` (input, items), with the parameter that names each: a
    message's content, and a function's output."""
    found = []
    for index, item in enumerate(items):
        for name in ("content", "output"):
            parts = getattr(item, name, None)
            if isinstance(parts, list):
                for position, part in enumerate(parts):
                    if getattr(part, "type", None) == "input_file":
                        found.append((part, f"{field}[{index}].{name}[{position}]"))
    return found


async def read_input_files(items: Iterable[Any], files: FileService, tenant: str, field: str = "input") -> None:
    """Give every `input_file` part of `items` its text (`part.resolve`), or raise a 4xx naming the part."""
    for part, param in input_file_parts(items, field):
        if part.file_url is not None:
            raise bad_request("file_url is not supported: upload the file (POST /v1/files) and pass its file_id.", param=f"{param}.file_url")
        if (part.file_id is None) == (part.file_data is None):
            raise bad_request("An input_file needs exactly one of file_id and file_data.", param=param)
        config = files.config
        if part.file_id is not None:
            stored = await files.file(part.file_id, tenant, param=f"{param}.file_id")
            name = part.filename or stored.filename
            # Text of more than 4 bytes a character at most is surely too long to give.
            pdf, read = await read_bounded(files.blobs, stored.blob, config.max_input_pdf_bytes, config.max_input_file_chars * 4)
            if read is None:
                raise _pdf_too_large(name, config.max_input_pdf_bytes, param) if pdf else _too_long(name, config.max_input_file_chars, param)
            data = read
        else:
            name = part.filename or "file"
            data = await run_cpu(_inline_bytes, part.file_data, param)
        if data.startswith(b"%PDF-"):
            if len(data) > config.max_input_pdf_bytes:
                raise _pdf_too_large(name, config.max_input_pdf_bytes, param)
            try:
                text = await run_isolated(config.pdf_timeout_s, file_text, name, data, config.max_input_file_chars, tenant=tenant)
            except TooCostly as exc:
                raise bad_request(f"The text of the PDF '{name[:100]}' could not be extracted: {exc}.", param=param) from None
        else:
            text = await run_cpu(file_text, name, data, config.max_input_file_chars)
        if isinstance(text, Refusal):
            raise APIError(400, text.message, param=param, code=text.code)
        part.resolve(f"[file {name}]\n{text}\n[end of file {name}]")


@dataclass(frozen=True)
class Refusal:
    """Why a file's text is not given to the model (made where it is read: maybe in a worker process)."""

    code: str
    message: str


async def read_bounded(blobs: Blobs, blob: str, pdf_limit: int, text_limit: int) -> tuple[bool, bytes | None]:
    """Whether a stored file is a PDF, and its bytes, or None when it is larger than its kind's limit (the
    size is known before reading: a file surely too long is not read at all)."""
    async with await blobs.open(blob) as reader:
        head = await reader.read(5)
        pdf = head == b"%PDF-"
        limit = pdf_limit if pdf else text_limit
        if reader.size > limit:
            return pdf, None
        return pdf, head + await reader.read(limit - len(head))


def _inline_bytes(file_data: str, param: str) -> bytes:
    encoded = file_data.split(",", 1)[1] if file_data.startswith("data:") and "," in file_data else file_data
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request("file_data must be base64 (or a base64 data URL).", param=f"{param}.file_data") from None


def file_text(name: str, data: bytes, max_chars: int) -> str | Refusal:
    """The text of a file for the model, or why the gateway cannot give it (a PDF's in a worker process)."""
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if data.startswith(b"%PDF-"):
        text = _pdf_text(data)
    elif suffix in TEXT_SUFFIXES or not suffix:
        try:
            text = _unreadable(name) if b"\0" in data else data.decode("utf-8-sig")
        except UnicodeDecodeError:
            text = _unreadable(name)
    else:
        text = _unreadable(name)
    if isinstance(text, str) and len(text) > max_chars:
        return Refusal(
            "file_too_large", f"The text of '{name[:100]}' is {len(text)} characters; this gateway gives the model {max_chars} at most per file."
        )
    return text


def _pdf_text(data: bytes) -> str | Refusal:
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = len(reader.pages)
        if pages <= MAX_PDF_PAGES:
            return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()
    except Exception as exc:  # a hostile PDF may break the parser in any way: it is the client's file that is bad
        return Refusal("invalid_value", f"The PDF could not be read ({type(exc).__name__}).")
    return Refusal("invalid_value", f"The PDF has {pages} pages; {MAX_PDF_PAGES} at most are read.")


def _pdf_too_large(name: str, max_bytes: int, param: str) -> APIError:
    return bad_request(f"The PDF '{name[:100]}' is larger than {max_bytes} bytes, the most read here.", param=param)


def _too_long(name: str, max_chars: int, param: str) -> APIError:
    message = f"The text of '{name[:100]}' is longer than {max_chars} characters, the most this gateway gives the model per file."
    return APIError(400, message, param=param, code="file_too_large")


def _unreadable(name: str) -> Refusal:
    return Refusal(
        "unsupported_file",
        f"'{name[:100]}' is not a file the model can read: gpt-oss reads text only (plain text, CSV, JSON, Markdown, "
        "PDF and other text formats, UTF-8).",
    )
