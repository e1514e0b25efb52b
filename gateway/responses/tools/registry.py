"""The kinds of tools, listed once. Everything the request's rules need to know of them is derived from
this list: the `include` values accepted, the tools nothing here runs, which request tool an
`allowed_tools` entry names, which tool a named `tool_choice` belongs to, and the built-in namespaces
no client or operator may take for a namespace of its own (tools/namespaces.py holds those names, since
configuration checks them before any request; a test holds the two together)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from connectors.namespaces import RESERVED_NAMESPACES

from ...errors import bad_request
from ...protocol import Include
from ..history.dialog import Dialog, InputReader
from ..shapes.request import NOT_INCLUDABLE, AllowedTools, ResponsesRequest, ToolChoiceForm, unsupported
from ..shapes.response_object import echo_tool
from ..shapes.tool_models import RequestTool
from .apply_patch import ApplyPatch
from .base import AnyTool, ToolNeeds
from .code_interpreter import CodeInterpreter
from .file_search import FileSearch
from .functions import FunctionTools
from .local_shell import LocalShell
from .mcp import McpServers
from .namespace_tools import NamespaceTools
from .shell import Shell
from .tool_search import ToolSearch
from .web_search import WebSearch

logger = logging.getLogger("gateway.responses")

# In the order the model reads them: the browser is declared before python, as gpt-oss was trained.
TOOLS: tuple[type[AnyTool], ...] = (
    FunctionTools,
    NamespaceTools,
    ToolSearch,
    Shell,
    LocalShell,
    ApplyPatch,
    WebSearch,
    FileSearch,
    CodeInterpreter,
    McpServers,
)


def _input_readers() -> dict[type[Any], InputReader]:
    """Every tool's input readers, by item type: one reader for each type (two tools claiming one is a bug)."""
    readers: dict[type[Any], InputReader] = {}
    for tool in TOOLS:
        for item_type, reader in tool.reads.items():
            assert item_type not in readers, f"{item_type.__name__} is read by two tools"
            readers[item_type] = reader
    return readers


# How each tool's items come back as input (the history's dispatch, input_items.py).
INPUT_READERS = _input_readers()
# What a response that stopped for the client owes, by the type of the item that asks (steering.py).
OWED_INPUT = {kind: stub for tool in TOOLS for kind, stub in tool.owes.items()}


def carried_out_by_a_response(dialog: Dialog) -> str | None:
    """An input item type in `dialog` that only a response carries out, if one is there (each tool's `carried_out`)."""
    return next((kind for tool in TOOLS if (kind := tool.carried_out(dialog)) is not None), None)


# `include` values the response itself honours; the tools' own are added from their classes.
CORE_INCLUDES = (Include.ENCRYPTED_REASONING, Include.LOGPROBS)
INCLUDABLE: frozenset[str] = frozenset({*CORE_INCLUDES, *(value for tool in TOOLS for value in tool.includes)})
BUILT_IN_NAMESPACES: frozenset[str] = frozenset(name for tool in TOOLS for name in tool.namespaces)
assert BUILT_IN_NAMESPACES <= RESERVED_NAMESPACES, "a tool answers a namespace that is not reserved"


def kind_of(tool: Any) -> type[AnyTool] | None:
    """The kind of a request's tool; None for one of OpenAI's that nothing here runs."""
    return next((kind for kind in TOOLS if isinstance(tool, kind.request_types)), None)


def choice_owner(choice: Any) -> type[AnyTool] | None:
    """The kind a named `tool_choice` belongs to; None for `auto`, `none`, `required`."""
    return next((kind for kind in TOOLS if isinstance(choice, kind.choices)), None)


def check_include(values: list[str]) -> None:
    """Every `include` value is one the gateway honours; one it cannot is refused by name."""
    for index, value in enumerate(values):
        if value in NOT_INCLUDABLE:
            raise unsupported(f"include[{index}]", f"'{value}': {NOT_INCLUDABLE[value]}")
        if value not in INCLUDABLE:
            raise bad_request(f"Invalid value for 'include[{index}]': '{value}' is not an includable field.", param=f"include[{index}]")


def available_tools(tools: list[Any], services: ToolNeeds) -> list[Any]:
    """The request's tools without those nothing here runs: refused by name, or dropped if configured so."""

    def unavailable(tool: Any) -> bool:
        kind = kind_of(tool)  # None for one of OpenAI's tools nothing here runs (request.UnavailableTool)
        return kind is None or not kind.available(services)

    for index, tool in enumerate(tools):
        if unavailable(tool):
            if not services.config.server.drop_unavailable_tools:
                raise unsupported(f"tools[{index}]", f"the '{tool.type}' tool is not available here")
            logger.warning("dropped the request's '%s' tool: nothing on this gateway runs it", tool.type)
    return [tool for tool in tools if not unavailable(tool)]


def offered_tools(tools: list[Any], choice: Any) -> tuple[list[Any], Any]:
    """The tools the model is offered, and the choice that is left: `allowed_tools` narrows the request's
    tools to those it lists and becomes its mode."""
    if not isinstance(choice, AllowedTools):
        return tools, choice
    offered: list[Any] = []
    for index, ref in enumerate(choice.tools):
        match = next((tool for tool in tools if (kind := kind_of(tool)) is not None and kind.matches(tool, ref)), None)
        if match is None:
            raise bad_request(f"tool_choice.tools[{index}] names no tool of this request.", param=f"tool_choice.tools[{index}]")
        if match not in offered:
            offered.append(match)
    return offered, choice.mode


@dataclass(frozen=True)
class Echoed:
    """The request's tools and tool choice as its Response shows them: as the client named them."""

    tools: list[dict[str, Any]]
    choice: str | dict[str, Any]


@dataclass(frozen=True)
class Offered:
    """What the model is offered of the request's tools, and the choice left; and what the Response echoes
    (what came before `allowed_tools` narrowed them). The request itself is left as it came."""

    tools: list[RequestTool]
    choice: str | ToolChoiceForm
    echoed: Echoed


def settle_tools(request: ResponsesRequest, services: ToolNeeds) -> Offered:
    """Check the request's `include`, drop (or refuse) the tools nothing here runs, and narrow `tools` and
    `tool_choice` to what the model is offered."""
    check_include(request.include or [])
    available = available_tools(request.tools, services)
    choice = request.tool_choice
    echoed = Echoed([echo_tool(tool) for tool in available], choice if isinstance(choice, str) else choice.model_dump(exclude_none=True))
    tools, narrowed = offered_tools(available, choice)
    return Offered(tools, narrowed, echoed)
