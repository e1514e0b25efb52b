"""What tool search searches: the request's functions marked `defer_loading` (on their own, or in a
namespace) and the tools of its MCP servers marked so, listed to the model one line each (a namespace or
a server: its name and description), and found by the words of a query."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Union

from connectors.servers import EnabledServer

from ..shapes.tool_models import CustomTool, FunctionTool, NamespaceFunction, NamespaceTool

MAX_FOUND = 8  # functions one search loads
MAX_QUERY_WORDS = 32
SUMMARY_CHARS = 120  # of a description, in the list the model reads

Deferred = Union[FunctionTool, CustomTool, NamespaceFunction]


@dataclass(frozen=True)
class Entry:
    """One deferred function or MCP tool, and what a query is matched against."""

    recipient: str  # functions.NAME, NAMESPACE.NAME or LABEL.NAME
    name: str
    group: str | None  # the namespace or MCP server it is in; None for a function on its own
    name_words: str  # its names, lowercased: a query word found here counts more
    words: str  # its names, descriptions and parameter names, lowercased
    function: Deferred | None = None  # a client function's definition; an MCP tool's is its server's


def summary(text: str | None) -> str:
    """A description's first line, short."""
    line = (text or "").strip().split("\n", 1)[0].strip()
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1].rstrip() + "…"


def _entry(group: str | None, name: str, description: str | None, parameters: Any, context: str, function: Deferred | None = None) -> Entry:
    recipient = f"{group or 'functions'}.{name}"
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    names = " ".join(properties) if isinstance(properties, dict) else ""
    name_words = f"{recipient} {name.replace('_', ' ')}".lower()
    return Entry(recipient, name, group, name_words, f"{name_words} {description or ''} {names} {context}".lower(), function)


def _function_entry(function: Deferred, namespace: NamespaceTool | None) -> Entry:
    context = f"{namespace.name} {namespace.description}" if namespace else ""
    parameters = getattr(function, "parameters", None)
    return _entry(namespace.name if namespace else None, function.name, function.description, parameters, context, function)


class Catalog:
    """The request's deferred functions, in the request's order, then its deferred MCP servers' tools."""

    def __init__(self, tools: list[Any]) -> None:
        self.entries: list[Entry] = []
        self.lines: list[str] = []  # what the model is told is there to find
        self.namespaces: dict[str, NamespaceTool] = {}
        self.servers: dict[str, EnabledServer] = {}
        for tool in tools:
            if isinstance(tool, (FunctionTool, CustomTool)) and tool.defer_loading:
                self.entries.append(_function_entry(tool, None))
                self.lines.append(f"- functions.{tool.name}: {summary(tool.description)}")
            elif isinstance(tool, NamespaceTool):
                deferred = [function for function in tool.tools if function.defer_loading]
                self.entries += [_function_entry(function, tool) for function in deferred]
                if deferred:  # a namespace is listed by its name and description only
                    self.namespaces[tool.name] = tool
                    self.lines.append(f"- {tool.name} ({len(deferred)} functions): {summary(tool.description)}")

    def add_servers(self, servers: Iterable[EnabledServer]) -> None:
        """The deferred MCP servers, connected: listed like a namespace, their tools found one by one. A
        server that is unavailable has nothing to find."""
        for server in servers:
            tools = server.tools() if server.connection.connected else []
            if not tools:
                continue
            self.servers[server.label] = server
            context = f"{server.label} {server.about()}"
            self.entries += [_entry(server.label, tool.name, tool.description, tool.input_schema, context) for tool in tools]
            self.lines.append(f"- {server.label} ({len(tools)} tools): {summary(server.about())}")

    def __bool__(self) -> bool:
        return bool(self.entries)

    def search(self, query: str, loaded: set[str]) -> list[Entry]:
        """The functions a query finds, best first, leaving out those already loaded. A query that names a
        function (`NAME`, `functions.NAME`, `NAMESPACE.NAME`), a namespace or a server finds exactly that."""
        wanted = query.strip().lower()
        exact = [entry for entry in self.entries if wanted in (entry.recipient.lower(), entry.name.lower())]
        exact = exact or [entry for entry in self.entries if entry.group is not None and entry.group.lower() == wanted]
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

    def definitions(self, found: list[Entry]) -> list[dict[str, Any]]:
        """The found tools as `tool_search_output.tools` has them: a function on its own, its namespace
        holding the functions found in it, or its MCP server with the tools found as `allowed_tools`."""
        result: list[dict[str, Any]] = []
        groups: dict[str, dict[str, Any]] = {}
        for entry in found:
            function = entry.function.model_dump(mode="json", exclude_none=True, by_alias=True) if entry.function else None
            if entry.group is None:
                assert function is not None
                result.append(function)
                continue
            group = groups.get(entry.group)
            if group is None:
                group = groups[entry.group] = self._group(entry.group)
                result.append(group)
            if function is None:
                group["allowed_tools"].append(entry.name)
            else:
                group["tools"].append(function)
        return result

    def _group(self, name: str) -> dict[str, Any]:
        if name in self.servers:
            return {"type": "mcp", "server_label": name, "allowed_tools": []}
        namespace = self.namespaces[name]
        return {"type": "namespace", "name": name, "description": namespace.description, "tools": []}
