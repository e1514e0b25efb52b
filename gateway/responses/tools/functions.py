"""The client's functions and custom tools: declared in the developer message's `functions` namespace,
called as `functions.NAME`, run by the client (client.py)."""

from __future__ import annotations

from typing import Any, Iterable

from ...errors import bad_request
from ..history.dialog import Dialog
from ..history.tool_declarations import LoadedTool
from ..shapes.grammars import InvalidGrammar, check_grammar
from ..shapes.input_models import CustomToolCallItem, CustomToolCallOutputItem, FunctionCallItem, FunctionCallOutputItem
from ..shapes.items import CustomToolCallOutput, FunctionCallOutput
from ..shapes.request import NamedCustom, NamedFunction, ToolChoiceForm
from ..shapes.tool_models import CustomTool, FunctionTool, GrammarInput, RequestTool
from ..shapes.tool_search_models import is_loaded
from .base import Declarations, ToolContext, owed_output
from .client import ClientTools, describe, read_custom_call, read_function_call, read_function_output
from .loaded import LoadedTools


class FunctionTools(ClientTools[FunctionTool | CustomTool]):
    request_types = (FunctionTool, CustomTool)
    namespaces = frozenset({"functions"})
    choices = (NamedFunction, NamedCustom)
    metric = "function"
    produces = (FunctionCallOutput, CustomToolCallOutput)
    # Every call to a client's function, a namespace's included (their items are the same), and its output.
    reads = {
        FunctionCallItem: read_function_call,
        FunctionCallOutputItem: read_function_output,
        CustomToolCallItem: read_custom_call,
        CustomToolCallOutputItem: read_function_output,
    }
    owes = {"function_call": owed_output("function_call_output", "name"), "custom_tool_call": owed_output("custom_tool_call_output")}

    def __init__(self, context: ToolContext, declared: list[FunctionTool | CustomTool]) -> None:
        super().__init__(context, declared)
        self.functions: dict[str, FunctionTool | CustomTool] = {tool.name: tool for tool in self.declared}
        # A deferred function's call names it as its namespace too: OpenAI's shape, which the Agents SDK reads.
        self.callables = {tool.recipient: (tool, tool.name if tool.defer_loading else None) for tool in self.functions.values()}
        self.deferred = {tool.recipient for tool in self.declared if tool.defer_loading}

    def add_loaded(self, tools: list[LoadedTool], searched: bool = True) -> None:
        for tool in tools:
            if isinstance(tool, (FunctionTool, CustomTool)) and tool.recipient not in self.callables:
                # A searched function's call names it as its namespace too (OpenAI's shape); an added one's, as declared.
                self.callables[tool.recipient] = (tool, tool.name if searched else None)

    @staticmethod
    def matches(tool: RequestTool, ref: dict[str, Any]) -> bool:
        assert isinstance(tool, (FunctionTool, CustomTool))
        kind = "function" if isinstance(tool, FunctionTool) else "custom"
        return ref.get("type") == kind and ref.get("name") == tool.name

    def strict_functions(self) -> list[tuple[str, str, Any]]:
        return [(self.param(tool), tool.recipient, tool) for tool in self.declared if isinstance(tool, FunctionTool)]

    async def prepare(self, dialog: Dialog, provision: bool) -> None:
        await super().prepare(dialog, provision)
        for tool in self.declared:
            if isinstance(tool, CustomTool) and isinstance(tool.format, GrammarInput):
                try:
                    await check_grammar(tool.format.syntax, tool.format.definition, self.context.tenant)
                except InvalidGrammar as exc:
                    raise bad_request(
                        f"Invalid grammar for custom tool '{tool.name}': {exc}.", param=f"{self.param(tool)}.format.definition"
                    ) from None

    def recipients(self) -> Iterable[str]:
        return self.namespaces

    def check_choice(self, choice: ToolChoiceForm) -> None:
        assert isinstance(choice, (NamedFunction, NamedCustom))
        wanted = FunctionTool if isinstance(choice, NamedFunction) else CustomTool
        if not isinstance(self.functions.get(choice.name), wanted):
            kind = "" if wanted is FunctionTool else "the custom tool "
            raise bad_request(f"tool_choice names {kind}'{choice.name}', which is not in tools.", param="tool_choice.name")
        recipient = f"functions.{choice.name}"
        if recipient in self.deferred and not is_loaded(recipient, self.dialog.tool_state(LoadedTools).recipients):
            raise bad_request(
                f"tool_choice names '{choice.name}', which is deferred (defer_loading) and not loaded yet: use auto or required, "
                "or load it with tool search first.",
                param="tool_choice.name",
            )

    def forced_header(self, choice: str | ToolChoiceForm) -> str | None:
        if isinstance(choice, NamedFunction):
            return f"<|channel|>commentary to=functions.{choice.name} <|constrain|>json<|message|>"
        if isinstance(choice, NamedCustom):
            return f"<|channel|>commentary to=functions.{choice.name}<|message|>"
        if choice == "required" and self.functions:  # the model still picks the function
            return "<|channel|>commentary to=functions."
        return None

    def declare(self, declarations: Declarations) -> None:
        if self.context.enabled:
            declarations.functions += [describe(tool) for tool in self.functions.values() if tool.recipient not in self.deferred]
