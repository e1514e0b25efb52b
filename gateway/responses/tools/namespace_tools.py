"""The client's `namespace` tools: functions grouped under a name of their own, declared to the model as a
Harmony namespace in the developer message, called as `NAME.function`, run by the client (client.py)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from connectors.namespaces import RESERVED_NAMESPACES

from ...engine.harmony import ToolNamespaceConfig
from ...errors import bad_request
from ..history.tool_declarations import LoadedTool
from ..shapes.items import CustomToolCallOutput, FunctionCallOutput
from ..shapes.tool_models import CustomTool, NamespaceTool, RequestTool
from .base import AnyTool, Declarations, ToolContext
from .client import ClientTools, describe


class NamespaceTools(ClientTools[NamespaceTool]):
    request_types = (NamespaceTool,)
    metric = "function"
    produces = (FunctionCallOutput, CustomToolCallOutput)  # read back, and owed, as functions.py's: the items are the same

    def __init__(self, context: ToolContext, declared: list[NamespaceTool]) -> None:
        super().__init__(context, declared)
        for tool in self.declared:
            self.callables |= {f"{tool.name}.{function.name}": (function, tool.name) for function in tool.tools}
            self.deferred |= {f"{tool.name}.{function.name}" for function in tool.tools if function.defer_loading}
        self.loaded_namespaces: list[str] = []  # namespaces only a client's tool search loaded

    def add_loaded(self, tools: list[LoadedTool], searched: bool = True) -> None:
        for tool in tools:
            if not isinstance(tool, NamespaceTool):
                continue
            if tool.name not in self.recipients() and tool.name not in self.loaded_namespaces:
                self.loaded_namespaces.append(tool.name)
            for function in tool.tools:
                self.callables.setdefault(f"{tool.name}.{function.name}", (function, tool.name))

    @staticmethod
    def matches(tool: RequestTool, ref: dict[str, Any]) -> bool:
        assert isinstance(tool, NamespaceTool)
        return ref.get("type") == "namespace" and ref.get("name") == tool.name

    def strict_functions(self) -> list[tuple[str, str, Any]]:
        return [
            (f"{self.param(tool)}.tools[{inner}]", f"{tool.name}.{function.name}", function)
            for tool in self.declared
            for inner, function in enumerate(tool.tools)
            if not isinstance(function, CustomTool)
        ]

    def recipients(self) -> Iterable[str]:
        return [tool.name for tool in self.declared] + self.loaded_namespaces

    def prepared(self, tools: Sequence[AnyTool]) -> None:
        # The client's names may not shadow any other tool's, nor a namespace the model knows.
        others = {name for other in tools if other is not self for name in other.recipients()}
        self.check_names({*RESERVED_NAMESPACES, *others})

    def check_names(self, taken: set[str]) -> None:
        """A namespace's name may not be one the model already knows another way (`taken`)."""
        for tool in self.declared:
            if tool.name in taken:
                raise bad_request(f"The namespace '{tool.name}' clashes with another tool of that name.", param=f"{self.param(tool)}.name")
            taken.add(tool.name)
            names = [function.name for function in tool.tools]
            if len(set(names)) != len(names):
                raise bad_request(f"The namespace '{tool.name}' declares a function twice.", param=f"{self.param(tool)}.tools")

    def declare(self, declarations: Declarations) -> None:
        if self.context.enabled:
            for tool in self.declared:
                functions = [describe(function) for function in tool.tools if f"{tool.name}.{function.name}" not in self.deferred]
                if functions:  # a namespace whose functions are all deferred is only in tool search's list
                    declarations.developer.append(ToolNamespaceConfig(name=tool.name, description=tool.description, tools=functions))
