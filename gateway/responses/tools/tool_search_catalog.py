"""What tool search searches: the request's functions marked `defer_loading` (on their own, or in a
namespace), listed to the model one line each, and found by the words of a query."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Union

from ..request import CustomTool, FunctionTool, NamespaceFunction, NamespaceTool

MAX_FOUND = 8  # functions one search loads
MAX_QUERY_WORDS = 32
SUMMARY_CHARS = 120  # of a description, in the list the model reads

Deferred = Union[FunctionTool, CustomTool, NamespaceFunction]


@dataclass(frozen=True)
class Entry:
    """One deferred function, and what a query is matched against."""

    recipient: str  # functions.NAME or NAMESPACE.NAME
    function: Deferred
    namespace: NamespaceTool | None
    name_words: str  # its names, lowercased: a query word found here counts more
    words: str  # its names, descriptions and parameter names, lowercased


def summary(text: str | None) -> str:
    """A description's first line, short."""
    line = (text or "").strip().split("\n", 1)[0].strip()
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1].rstrip() + "…"


def _entry(function: Deferred, namespace: NamespaceTool | None) -> Entry:
    recipient = f"{namespace.name if namespace else 'functions'}.{function.name}"
    parameters = getattr(function, "parameters", None) or {}
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    names = " ".join(properties) if isinstance(properties, dict) else ""
    name_words = f"{recipient} {function.name.replace('_', ' ')}".lower()
    context = f"{namespace.name} {namespace.description}" if namespace else ""
    return Entry(recipient, function, namespace, name_words, f"{name_words} {function.description or ''} {names} {context}".lower())


class Catalog:
    """The request's deferred functions, in the request's order."""

    def __init__(self, tools: list[Any]) -> None:
        self.entries: list[Entry] = []
        self.lines: list[str] = []  # what the model is told is there to find
        for tool in tools:
            if isinstance(tool, (FunctionTool, CustomTool)) and tool.defer_loading:
                self.entries.append(_entry(tool, None))
                self.lines.append(f"- functions.{tool.name}: {summary(tool.description)}")
            elif isinstance(tool, NamespaceTool):
                deferred = [function for function in tool.tools if function.defer_loading]
                self.entries += [_entry(function, tool) for function in deferred]
                if deferred:  # a namespace is listed by its name and description only
                    self.lines.append(f"- {tool.name} ({len(deferred)} functions): {summary(tool.description)}")

    def __bool__(self) -> bool:
        return bool(self.entries)

    def search(self, query: str, loaded: set[str]) -> list[Entry]:
        """The functions a query finds, best first, leaving out those already loaded. A query that names a
        function (`NAME`, `functions.NAME`, `NAMESPACE.NAME`) or a namespace finds exactly that."""
        wanted = query.strip().lower()
        exact = [entry for entry in self.entries if wanted in (entry.recipient.lower(), entry.function.name.lower())]
        exact = exact or [entry for entry in self.entries if entry.namespace is not None and entry.namespace.name.lower() == wanted]
        if exact:
            return [entry for entry in exact if entry.recipient not in loaded][:MAX_FOUND]
        words = list(dict.fromkeys(re.findall(r"[a-z0-9]+", wanted)))[:MAX_QUERY_WORDS]
        scored: list[tuple[int, int, Entry]] = []
        for order, entry in enumerate(self.entries):
            if entry.recipient in loaded:
                continue
            score = sum(2 if word in entry.name_words else 1 for word in words if word in entry.words)
            if score:
                scored.append((-score, order, entry))
        return [entry for _, _, entry in sorted(scored, key=lambda found: found[:2])[:MAX_FOUND]]


def definitions(found: list[Entry]) -> list[dict[str, Any]]:
    """The found functions as `tool_search_output.tools` has them: a function on its own, or its namespace
    holding the functions found in it."""
    result: list[dict[str, Any]] = []
    namespaces: dict[str, dict[str, Any]] = {}
    for entry in found:
        function = entry.function.model_dump(mode="json", exclude_none=True, by_alias=True)
        if entry.namespace is None:
            result.append(function)
            continue
        group = namespaces.get(entry.namespace.name)
        if group is None:
            group = namespaces[entry.namespace.name] = {
                "type": "namespace",
                "name": entry.namespace.name,
                "description": entry.namespace.description,
                "tools": [],
            }
            result.append(group)
        group["tools"].append(function)
    return result
