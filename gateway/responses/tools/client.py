"""What the client's own tools share (functions.py, namespaces.py): the model's call to one streams as a
`function_call` (or `custom_tool_call`) and ends the response, for the client to run and answer with a
`function_call_output`. Arguments that are not JSON, or break a strict function's schema, or a custom
tool's input that breaks its grammar, are not handed to the client: the model is told to write the call
again. Where the engine's grammar held the call to its shape as it was written (loop/constraint.py), it
streams live and such a call (which the grammar makes rare) ends incomplete; where nothing held it, the
call is shown whole once it is known to be usable, and nothing of it otherwise."""

from __future__ import annotations

from typing import Iterable

from openai_harmony import Message, Role

from ...core.ids import new_id
from ...engine.structural_tag import JSON_OBJECT, TEXT, CallShape, Content, json_schema
from ...errors import bad_request
from ...protocol import ItemStatus
from ..events.log import Batch
from ..events.tool_call import CallKind, ToolCall
from ..history.dialog import Dialog, Records, read_call, read_call_output, tool_call_message
from ..history.tool_declarations import Function, LoadedTool, describe, parsed_definitions
from ..shapes.grammars import input_problem
from ..shapes.input_models import CustomToolCallItem, CustomToolCallOutputItem, FunctionCallItem, FunctionCallOutputItem
from ..shapes.items import CustomToolCallOutput, Delta, Event, FunctionCallOutput
from ..shapes.schemas import InvalidSchema, checked_schema, json_object, json_problem, schema_compiles
from ..shapes.tool_models import CustomTool, FunctionTool, GrammarInput, NamespaceFunction
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

    def add_loaded(self, tools: list[LoadedTool], searched: bool = True) -> None:
        """Tools a client's tool search loaded earlier in the conversation (or an `additional_tools` item
        added: not `searched`) that the request does not declare (the model read their declarations in the
        dialog): callable like the declared ones."""

    async def prepare(self, dialog: Dialog, provision: bool) -> None:
        await super().prepare(dialog, provision)
        loaded = dialog.tool_state(LoadedTools)
        if loaded.definitions:
            self.add_loaded(parsed_definitions(loaded.definitions))
        if loaded.added:
            self.add_loaded(parsed_definitions(loaded.added), searched=False)
        for param, recipient, function in self.strict_functions():
            if function.strict is False:  # OpenAI's default is strict
                continue
            try:
                self.schemas[recipient] = canonical = checked_schema(function.parameters)
                await schema_compiles(canonical, self.context.services.config.isolation.schema_timeout_s, self.context.tenant)
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
        function, _ = found
        if not self._streams_live(function):
            call.claim(self, CallKind.CLIENT)  # its item comes whole once the call is known to be usable (`written`)
            return None
        item = self._new_item(call)
        call.claim(self, CallKind.CLIENT, item)
        return item

    def _streams_live(self, function: Function) -> bool:
        """Whether the call's item streams as the model writes it: only where the engine's grammar holds it to
        what `written` checks (a lark grammar is not translated into the engine's: its input is free text)."""
        unenforced_grammar = isinstance(function, CustomTool) and isinstance(function.format, GrammarInput) and function.format.syntax != "regex"
        return self.context.output.enforced and not unenforced_grammar

    def _new_item(self, call: ToolCall) -> FunctionCallOutput:
        function, namespace = self.callables[call.recipient]
        if isinstance(function, CustomTool):
            return self.context.output.add(lambda index: CustomToolCallOutput(index, function.name, namespace))
        return self.context.output.add(lambda index: FunctionCallOutput(index, function.name, namespace))

    async def written(self, call: ToolCall, text: str) -> Batch:
        events = self.context.output.events
        problem = await self._problem(call.recipient, text)
        if problem is not None:
            # Streamed live (only where a grammar held it) and not even a JSON object: what any grammar of its
            # arguments forbids, so the engine did not hold it (a schema keyword its grammar skips is not that).
            held = call.item is not None and not isinstance(self.callables[call.recipient][0], CustomTool) and not json_object(text)
            call.invalidate(problem, held=held)
        item = call.item
        shown: list[Event | Delta] = []
        if item is None:  # held back while it was written: shown whole now, if it can be
            if problem is not None:
                return []
            item = call.item = self._new_item(call)
            self.dialog.owners[-1] = item.id  # the call's message belongs to its item (conversations, stored dialogs)
            shown = [*item.opened(events), item.delta(events, text)]
        assert isinstance(item, FunctionCallOutput)
        if problem is None:
            self.dialog.open_calls[item.call_id] = item.recipient  # answered by the client's output item
        return [*shown, *item.closed(events, ItemStatus.COMPLETED if problem is None else ItemStatus.INCOMPLETE)]

    async def _problem(self, recipient: str, text: str) -> str | None:
        """What the model is told when the call cannot go to the client as written (None: it can)."""
        function = self.callables[recipient][0]
        if isinstance(function, CustomTool):
            grammar = function.format
            problem = (
                await input_problem(grammar.syntax, grammar.definition, text, self.context.tenant) if isinstance(grammar, GrammarInput) else None
            )
            return None if problem is None else f"the input of {function.name} is not valid: {problem}. Call the tool again with input that is."
        problem = await json_problem(text, self.schemas.get(recipient), self.context.services.config.isolation.schema_timeout_s, self.context.tenant)
        if problem is None:
            return None
        return f"the arguments do not match the parameters of {function.name}: {problem}. Call the function again with arguments that do."


def read_function_call(dialog: Dialog, index: int, item: FunctionCallItem, records: Records) -> None:
    record = item.model_dump() | {"id": item.id or FunctionCallOutput.fresh_id(), "status": ItemStatus.COMPLETED}
    read_call(dialog, item.call_id, item.recipient, tool_call_message(item.recipient, item.arguments), record, records)


def read_custom_call(dialog: Dialog, index: int, item: CustomToolCallItem, records: Records) -> None:
    message = Message.from_role_and_content(Role.ASSISTANT, item.input).with_channel("commentary").with_recipient(item.recipient)
    record = item.model_dump() | {"id": item.id or CustomToolCallOutput.fresh_id(), "status": ItemStatus.COMPLETED}
    read_call(dialog, item.call_id, item.recipient, message, record, records)


def read_function_output(dialog: Dialog, index: int, item: FunctionCallOutputItem | CustomToolCallOutputItem, records: Records) -> None:
    record = item.model_dump() | {"status": ItemStatus.COMPLETED, "id": item.id or new_id("fco")}
    read_call_output(dialog, index, item.call_id, item.text(), record, records)
