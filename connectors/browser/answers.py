"""Search results read out of whatever a search server answers.

Search servers answer in many shapes: structured content (a list, or a `results` field), JSON written as
text (the official MCP SDK wraps a tool that returns a JSON string as `structuredContent: {"result":
"<json text>"}`), or text made for people: blocks of `Title:` / `URL:` / `Description:` lines, Markdown
links in a list, bare URLs with the lines around them. All are read here; the answer is hostile input
(bounded: at most `MAX_TEXT_CHARS` of it is read, and the patterns are linear).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from .pages import SearchResult

MAX_TEXT_CHARS = 200_000
_URL_KEYS = ("url", "link", "href")
_TITLE_KEYS = ("title", "name")
_SNIPPET_KEYS = ("snippet", "description", "content", "body", "text", "summary")
_LIST_KEYS = ("results", "result", "items", "web", "organic", "data")

_MARKDOWN_LINK = re.compile(r"\[([^\[\]\n]{1,300})\]\((https?://[^()\s]{1,2000})\)")
_BARE_URL = re.compile(r"https?://[^\s<>()\[\]\"']{1,2000}")
# `Title: …`, `- URL: …`, `**Snippet:** …`: a line's label, and the list marker or bold around it.
_LABEL = re.compile(r"^\s*(?:[-*]|\d{1,3}[.)])?\s*\**(title|url|link|source|description|snippet|summary|content)\**\s*:\s*\**\s*", re.IGNORECASE)
_MARKER = re.compile(r"^\s*(?:[-*>#]+|\d{1,3}[.)])\s*")
_BLOCK_SPLIT = re.compile(r"\n\s*\n|\n(?=\s*(?:\d{1,3}[.)]|[-*])\s)")


def read_answer(structured: Any, text: str) -> list[SearchResult]:
    """The results in a search tool's answer: its structured content if that holds them, else JSON
    found in it or in its text, else the text's blocks with URLs."""
    for data in (structured, _json_in(structured), _json_text(text)):
        found = results_of(data)
        if found:
            return found
    return text_results(text)


def says_none(structured: Any, text: str) -> bool:
    """Whether the answer says, in JSON, that nothing was found: an empty list of results."""
    for data in (structured, _json_in(structured), _json_text(text)):
        if data == [] or (isinstance(data, dict) and any(data.get(key) == [] for key in _LIST_KEYS)):
            return True
    return False


def results_of(data: Any, depth: int = 0) -> list[SearchResult]:
    """Results from JSON: a list of objects with a URL, or such a list under a usual key (nested a little)."""
    if isinstance(data, dict) and depth < 3:
        for key in _LIST_KEYS:
            value = data.get(key)
            if isinstance(value, (list, dict)):
                found = results_of(value, depth + 1)
                if found:
                    return found
            elif isinstance(value, str) and key == "result":  # the SDK's wrapping of a JSON string
                found = results_of(_json_text(value), depth + 1)
                if found:
                    return found
        return []
    if not isinstance(data, list):
        return []
    results = []
    for entry in data:
        if not isinstance(entry, dict):
            continue
        url = _first(entry, _URL_KEYS)
        if url is None or urlsplit(url).scheme not in ("http", "https"):
            continue
        results.append(SearchResult(_first(entry, _TITLE_KEYS, "")[:300], url, _first(entry, _SNIPPET_KEYS, "")[:1000]))
    return results


def text_results(text: str) -> list[SearchResult]:
    """Results from text for people: each block (paragraph or list item) with a URL is one result."""
    results: list[SearchResult] = []
    seen: set[str] = set()
    for block in _BLOCK_SPLIT.split(text[:MAX_TEXT_CHARS]):
        result = _block_result(block)
        if result is not None and result.url not in seen:
            seen.add(result.url)
            results.append(result)
    return results


def _block_result(block: str) -> SearchResult | None:
    link = _MARKDOWN_LINK.search(block)
    if link is not None:
        title, url = link.group(1).strip(), link.group(2)
        rest = block[: link.start()] + block[link.end() :]
    else:
        found = _BARE_URL.search(block)
        if found is None:
            return None
        url, title, rest = found.group().rstrip(".,;"), "", block[: found.start()] + block[found.end() :]
    lines = []
    for line in rest.splitlines():
        label = _LABEL.match(line)
        value = line[label.end() :].strip() if label else _MARKER.sub("", line).strip()
        kind = label.group(1).lower() if label else ""
        if kind == "title" and not title:
            title = value.strip("*").strip()
        elif value and kind not in ("url", "link", "source"):
            lines.append(value)
    if not title and lines:
        title = lines.pop(0)
    return SearchResult(title[:300], url, " ".join(" ".join(lines).split())[:1000])


def _first(entry: dict[str, Any], keys: tuple[str, ...], default: Any = None) -> Any:
    return next((entry[key] for key in keys if isinstance(entry.get(key), str)), default)


def _json_text(text: Any) -> Any:
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS or not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _json_in(structured: Any) -> Any:
    """JSON text inside structured content (`{"result": "<json>"}`, as the SDK wraps a string)."""
    if isinstance(structured, dict) and isinstance(structured.get("result"), str):
        return _json_text(structured["result"])
    return None
