"""What the client's own tools share (functions.py, namespaces.py): the model's call to one streams as a
`function_call` (or `custom_tool_call`) and ends the response, for the client to run and answer with a
`function_call_output`. Arguments that are not JSON, or break a strict function's schema, or a custom
tool's input that breaks its grammar, are not handed to the client: the item is marked incomplete and
the model is told to write the call again."""

from __future__ import annotations

import json
from typing import Iterable

from openai_harmony import Message, Role

from runtime.isolation import TooCostly, run_isolated

from ...core.ids import new_id
from ...engine.structural_tag import JSON_OBJECT, TEXT, CallShape, Content, json_schema
from ...errors import bad_request
from ...protocol import ItemStatus
from ..history.dialog import Dialog, Records, read_call, read_call_output, tool_call_message
from ..history.tool_declarations import Function, LoadedTool, describe, parsed_definitions
from ..loop.tool_call import CallKind, ToolCall
from ..shapes.grammars import input_problem
from ..shapes.items import CustomToolCallOutput, Event, FunctionCallOutput
from ..shapes.request import (
    CustomTool,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionTool,
    GrammarInput,
    NamespaceFunction,
)
from ..shapes.schemas import InvalidSchema, argument_problem, checked_schema
from ..shapes.tool_search_models import TOOL_SEARCH_RECIPIENT, is_loaded
from .base import DeclaredT, Tool, ToolContext
from .loaded import LoadedTools

__all__ = ["ClientTools", "describe", "read_custom_call", "read_function_call", "read_function_output"]


class ClientTools(Tool[DeclaredT]):
    """The client's functions by the recipient the model addresses (`functions.NAME`, `NAMESPACE.NAME`)."""

    def __init__(self, context: ToolContext, declared: list[DeclaredT]) -> None:
        super().__init__(context, declared)
        self.callables: dict[str, tuple[Function, str | None]] = {}
        self.schemas: dict[str, str] = {}  # strict functions' parameters (canonical JSON Schema), by recipient
        self.deferred: set[str] = set()  # recipients declared with `defer_loading`: callable once tool search loads them
        self._shapes: dict[str, CallShape] = {}  # each callable's grammar (call_shapes), once made

    def strict_functions(self) -> list[tuple[str, str, FunctionTool | NamespaceFunction]]:
        """(param, recipient, function) of the functions whose arguments are checked against their schema."""
        return []

    def add_loaded(self, tools: list[LoadedTool]) -> None:
        """Tools a client's tool search loaded earlier in the conversation that the request does not declare
        (the model read their declarations in the dialog): callable like the declared ones."""

    async def prepare(self, dialog: Dialog, provision: bool) -> None:
        await super().prepare(dialog, provision)
        loaded = dialog.tool_state(LoadedTools)
        if loaded.definitions:
            self.add_loaded(parsed_definitions(loaded.definitions))
        for param, recipient, function in self.strict_functions():
            if function.strict is False:  # OpenAI's default is strict
                continue
            try:
                self.schemas[recipient] = checked_schema(function.parameters)
            except InvalidSchema as exc:
                raise bad_request(
                    f"Invalid schema for function '{function.name}': {exc}.", param=f"{param}.parameters", code="invalid_function_parameters"
                ) from None

    def call_shapes(self) -> Iterable[CallShape]:
        """Each function the model may call now (a deferred one once loaded), with its arguments' grammar:
        a strict function's schema, any JSON object otherwise; a custom tool's regex, or any text."""
        if not self.context.enabled:
            return ()
        loaded = self.dialog.tool_state(LoadedTools).recipients
        shapes = []
        for recipient, (function, _) in self.callables.items():
            if recipient in self.deferred and not is_loaded(recipient, loaded):
                continue
            shape = self._shapes.get(recipient)
            if shape is None:  # made once: an unchanged set of shapes is a grammar already made (loop/constraint.py)
                shape = self._shapes[recipient] = CallShape(recipient, self._arguments(recipient, function))
            shapes.append(shape)
        return shapes

    def _arguments(self, recipient: str, function: Function) -> Content:
        if isinstance(function, CustomTool):
            grammar = function.format
            return Content("regex", pattern=grammar.definition) if isinstance(grammar, GrammarInput) and grammar.syntax == "regex" else TEXT
        if recipient not in self.schemas or function.parameters is None:  # not strict
            return JSON_OBJECT
        # As the client wrote it (not the canonical form it is checked in): the grammar's properties come in
        # the schema's order, the order the model reads them in its declaration and writes them.
        return json_schema(function.parameters)

    def open_call(self, call: ToolCall, name: str) -> FunctionCallOutput | None:
        found = self.callables.get(call.recipient) if self.context.enabled else None
        if found is None:
            called = call.recipient.partition(".")[0]
            call.refuse(f"no function named '{name}' is available in {called}. Use only the declared functions.")
            return None
        if call.recipient in self.deferred and not is_loaded(call.recipient, self.dialog.tool_state(LoadedTools).recipients):
            call.refuse(f"'{call.recipient}' is not loaded: find it with {TOOL_SEARCH_RECIPIENT} first, then call it.")
            return None
        function, namespace = found
        output = self.context.output
        if isinstance(function, CustomTool):
            item: FunctionCallOutput = output.add(lambda index: CustomToolCallOutput(index, function.name))
        else:
            item = output.add(lambda index: FunctionCallOutput(index, function.name, namespace))
        call.claim(self, CallKind.CLIENT, item)
        return item

    async def written(self, call: ToolCall, text: str) -> list[Event]:
        item = call.item
        assert isinstance(item, FunctionCallOutput)
        status = await self._status(call, item)
        if status == ItemStatus.COMPLETED:
            self.dialog.open_calls[item.call_id] = item.recipient  # answered by the client's output item
        return item.closed(self.context.output.events, status)

    async def _status(self, call: ToolCall, item: FunctionCallOutput) -> ItemStatus:
        if isinstance(item, CustomToolCallOutput):
            return await self._input_status(call, item)
        try:
            json.loads(item.text)
        except ValueError as exc:
            call.invalidate(f"the arguments are not valid JSON ({exc}). Call the function again with a JSON object.")
            return ItemStatus.INCOMPLETE
        schema = self.schemas.get(item.recipient)
        if schema is None:
            return ItemStatus.COMPLETED
        # In a worker process, bounded: the client's schema and the model's arguments decide the cost.
        try:
            problem = await run_isolated(self.context.services.config.isolation.schema_timeout_s, argument_problem, schema, item.text)
        except TooCostly as exc:
            problem = f"the arguments could not be checked against the function's schema ({exc})"
        if problem is None:
            return ItemStatus.COMPLETED
        call.invalidate(f"the arguments do not match the parameters of {item.name}: {problem}. Call the function again with arguments that do.")
        return ItemStatus.INCOMPLETE

    async def _input_status(self, call: ToolCall, item: CustomToolCallOutput) -> ItemStatus:
        """A custom tool's input that breaks its grammar goes back to the model, like bad JSON arguments."""
        tool = self.callables[item.recipient][0]
        grammar = tool.format if isinstance(tool, CustomTool) else None
        if not isinstance(grammar, GrammarInput):
            return ItemStatus.COMPLETED
        problem = await input_problem(grammar.syntax, grammar.definition, item.text)
        if problem is None:
            return ItemStatus.COMPLETED
        call.invalidate(f"the input of {item.name} is not valid: {problem}. Call the tool again with input that is.")
        return ItemStatus.INCOMPLETE


def read_function_call(dialog: Dialog, index: int, item: FunctionCallItem, records: Records) -> None:
    record = item.model_dump() | {"id": item.id or new_id("fc"), "status": ItemStatus.COMPLETED}
    read_call(dialog, item.call_id, item.recipient, tool_call_message(item.recipient, item.arguments), record, records)


def read_custom_call(dialog: Dialog, index: int, item: CustomToolCallItem, records: Records) -> None:
    message = Message.from_role_and_content(Role.ASSISTANT, item.input).with_channel("commentary").with_recipient(item.recipient)
    record = item.model_dump() | {"id": item.id or new_id("ctc"), "status": ItemStatus.COMPLETED}
    read_call(dialog, item.call_id, item.recipient, message, record, records)


def read_function_output(dialog: Dialog, index: int, item: FunctionCallOutputItem | CustomToolCallOutputItem, records: Records) -> None:
    record = item.model_dump() | {"status": ItemStatus.COMPLETED, "id": item.id or new_id("fco")}
    read_call_output(dialog, index, item.call_id, item.text(), record, records)
