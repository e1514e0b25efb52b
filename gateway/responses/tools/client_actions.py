"""What the tools the client runs on its own machine share (shell.py, apply_patch.py): each is a Harmony
namespace of one function in the developer message; the model's call streams as the tool's own item
(`shell_call`, `apply_patch_call`) once its JSON arguments are complete and checked, and ends the response
for the client to run it and answer with the matching output item.

Arguments that do not parse or break the tool's rules are not handed to the client, and no item shows
them: the model is told to write the call again. (A client runs every such item it is given, whatever its
status, and the item's own fields cannot hold what the model got wrong.)"""

from __future__ import annotations

import json
from typing import Any, Callable, ClassVar, Generic, Iterable, TypeVar

from pydantic import BaseModel, ValidationError

from ...core.ids import new_id
from ...engine.harmony import ToolDescription, ToolNamespaceConfig
from ...errors import bad_request
from ...protocol import ItemStatus
from ..events.tool_call import CallKind, ToolCall
from ..history.dialog import Dialog, InputReader, Records, read_call, read_call_output, tool_call_message
from ..shapes.items import Event, Events, OutputItem
from ..shapes.request import ToolChoiceForm
from .base import Declarations, DeclaredT, Tool

ArgumentsT = TypeVar("ArgumentsT", bound=BaseModel)


class ClientActionItem(OutputItem, Generic[ArgumentsT]):
    """A call item whose arguments arrive whole: added as the call starts, filled in once it is written."""

    def __init__(self, output_index: int, call_id: str) -> None:
        super().__init__(output_index)
        self.call_id = call_id
        self.arguments: ArgumentsT | None = None
        self.announced = False  # added already (an item opened as the call started)

    def opened(self, events: Events) -> list[Event]:
        self.announced = True
        return [self.added(events)]

    def written(self, events: Events, arguments: ArgumentsT) -> list[Event]:
        """The whole call, once written: added (unless it was), its own events, and its end."""
        self.arguments = arguments
        added = [] if self.announced else self.opened(events)
        return [*added, *self.progress(events, arguments), *self.closed(events)]

    def progress(self, events: Events, arguments: ArgumentsT) -> list[Event]:
        return []

    def closed(self, events: Events, status: ItemStatus = ItemStatus.COMPLETED) -> list[Event]:
        self.status = status
        return [self.done(events)]


def action_call_reader(recipient: str, produced: type[OutputItem]) -> InputReader:
    """How the call item of an action the client runs comes back: the JSON call to `recipient` the model
    wrote, left open for the client's output."""

    def read(dialog: Dialog, index: int, item: Any, records: Records) -> None:
        record = item.model_dump(exclude_none=True) | {"id": item.id or produced.fresh_id(), "status": ItemStatus.COMPLETED}
        read_call(dialog, item.call_id, recipient, tool_call_message(recipient, item.arguments()), record, records)

    return read


def action_output_reader(call_id_of: Callable[[Any], str] = lambda item: item.call_id) -> InputReader:
    """How the client's output of an action comes back: the tool's answer the model reads."""

    def read(dialog: Dialog, index: int, item: Any, records: Records) -> None:
        record = item.model_dump(exclude_none=True) | {"status": item.status or ItemStatus.COMPLETED, "id": item.id or new_id("fco")}
        read_call_output(dialog, index, call_id_of(item), item.text(), record, records)

    return read


class ClientAction(Tool[DeclaredT]):
    """One function the model calls in the namespace `namespace`, run by the client."""

    function: ClassVar[str]  # the function's name in the namespace
    description: ClassVar[str]  # the namespace's description, as the model reads it
    parameters: ClassVar[dict[str, Any]]  # the function's JSON Schema
    arguments_type: ClassVar[type[BaseModel]]  # the arguments, checked

    @property
    def recipient(self) -> str:
        return f"{self.namespace}.{self.function}"

    @property
    def namespace(self) -> str:
        (name,) = self.namespaces
        return name

    async def prepare(self, dialog: Dialog, provision: bool) -> None:
        await super().prepare(dialog, provision)
        for tool in self.declared[1:]:
            raise bad_request(f"A request has at most one {self.namespace} tool.", param=f"{self.param(tool)}.type")

    def recipients(self) -> Iterable[str]:
        return self.namespaces if self.declared and self.context.enabled else ()

    def check_choice(self, choice: ToolChoiceForm) -> None:
        if not self.declared:
            raise bad_request(f"tool_choice is {self.namespace}, which is not in tools.", param="tool_choice.type")

    def forced_header(self, choice: str | ToolChoiceForm) -> str | None:
        if isinstance(choice, self.choices):
            return f"<|channel|>commentary to={self.recipient} <|constrain|>json<|message|>"
        return None

    def declare(self, declarations: Declarations) -> None:
        if self.declared and self.context.enabled:
            function = ToolDescription.new(self.function, self.function_description(), parameters=self.parameters)
            declarations.developer.append(ToolNamespaceConfig(name=self.namespace, description=self.namespace_description(), tools=[function]))

    def namespace_description(self) -> str:
        return self.description

    def function_description(self) -> str:
        return ""

    def make_item(self, output_index: int, call_id: str) -> ClientActionItem[Any]:
        raise NotImplementedError

    @property
    def runs_here(self) -> bool:
        """Whether the gateway runs the calls (a hosted shell) instead of the client."""
        return False

    def open_call(self, call: ToolCall, name: str) -> OutputItem | None:
        """Claimed as its header arrives; its item comes once it is written (`written`)."""
        if name != self.function:
            call.refuse(f"there is no tool '{call.recipient}'. Call {self.recipient}.")
            return None
        if self.runs_here and not self.context.budget.take(call):
            return None
        item = self.live_item()
        call.claim(self, CallKind.HOSTED if self.runs_here else CallKind.CLIENT, item)
        return item

    def live_item(self) -> ClientActionItem[Any] | None:
        """The item of a call that streams while the model writes it (one run here: the client never sees
        what the model got wrong); None where it comes whole once written."""
        return None

    async def written(self, call: ToolCall, text: str) -> list[Event]:
        try:
            arguments = self.arguments_type.model_validate(json.loads(text), strict=False)
            problem = self.problem(arguments)
        except (ValueError, ValidationError) as exc:
            problem = f"the arguments of {self.recipient} are not valid ({_short(exc)})"
        if problem is not None:
            call.invalidate(f"{problem}. Call {self.recipient} again with arguments that are valid.")
            live = call.item
            return live.closed(self.context.output.events, ItemStatus.INCOMPLETE) if isinstance(live, ClientActionItem) else []
        return self.accepted(call, arguments)

    def accepted(self, call: ToolCall, arguments: Any) -> list[Event]:
        """A call written as it should be: its item, streamed whole, for the client to run and answer."""
        output = self.context.output
        call_id = new_id("call")
        item = call.item = output.add(lambda index: self.make_item(index, call_id))
        self.dialog.open_calls[call_id] = self.recipient  # answered by the client's output item
        return item.written(output.events, arguments)

    def problem(self, arguments: Any) -> str | None:
        """Why arguments that parse still cannot go to the client (None: they can)."""
        return None


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else first["msg"]
    return str(exc)[:200]
