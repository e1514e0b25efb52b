"""The tools tool search loaded (tool_search.py): the dialog's part of the state that makes them callable
for the rest of the conversation, read by every kind whose tools can be deferred (functions, namespaces,
MCP servers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..history.tool_declarations import LoadedTool
from ..shapes.tool_search_models import loaded_recipients


@dataclass
class UnwrittenLoad:
    """A search's answer the model is to read, whose MCP servers' declarations come from the servers."""

    message: int  # its place in `Dialog.messages`
    tools: list[LoadedTool]


@dataclass
class LoadedTools:
    definitions: list[dict[str, Any]] = field(default_factory=list)  # as the searches found them
    recipients: set[str] = field(default_factory=set)  # what they make callable
    added: list[dict[str, Any]] = field(default_factory=list)  # as `additional_tools` items gave them (additional.py)
    # Answers of searches that loaded MCP servers' tools, sent in the request's input (not stored: written
    # once the request's servers are connected, mcp.py).
    unwritten: list[UnwrittenLoad] = field(default_factory=list)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> LoadedTools:
        definitions = list(stored.get("loaded_tools") or [])
        return cls(definitions, loaded_recipients(definitions), list(stored.get("added_tools") or []))

    def to_json(self) -> dict[str, Any]:
        return {"loaded_tools": self.definitions} | ({"added_tools": self.added} if self.added else {})

    def copy(self) -> LoadedTools:
        return LoadedTools(list(self.definitions), set(self.recipients), list(self.added), list(self.unwritten))

    def add(self, definitions: list[dict[str, Any]]) -> None:
        """Tools an `additional_tools` item offers: callable as if the request declared them."""
        self.added += definitions

    def load(self, definitions: list[dict[str, Any]]) -> None:
        self.definitions += definitions
        self.recipients |= loaded_recipients(definitions)
