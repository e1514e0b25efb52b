"""The shell's output items: the `shell_call` the model writes (run by the client or here), and the
`shell_call_output` of a call run here, whose stdout and stderr stream while each command runs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic_core import from_json

from ...protocol import EventType, ItemStatus
from ..shapes.items import Event, Events, LiveArgumentsItem, OutputItem
from ..shapes.output_items import ShellCallOutputShape, ShellCallShape
from ..shapes.shell_models import ShellAction
from .client_actions import ClientActionItem

MAX_LIVE_CHARS = 4096  # of a call's arguments followed live: each delta parses what was written so far


class ShellCall(ClientActionItem[ShellAction], LiveArgumentsItem):
    """A shell call: each command `added`, its text in `delta`s, then `done`. Run here, the commands stream
    while the model writes them (`feed`); run by the client, once the call is written and checked."""

    type = "shell_call"
    id_prefix = "sh"

    def __init__(self, output_index: int, call_id: str, environment: dict[str, Any] | None) -> None:
        super().__init__(output_index, call_id)
        self.environment = environment  # `local`, or the container it runs in
        self.written_text: list[str] = []  # the arguments so far, while short enough to follow live
        self.written_size = 0
        self.sent: list[str] = []  # each command's text streamed so far
        self.finished = 0  # commands whose `done` was sent

    def feed(self, events: Events, text: str) -> list[Event]:
        self.written_size += len(text)
        if self.written_size > MAX_LIVE_CHARS:  # a long call: the rest of its commands come when it is written
            return []
        self.written_text.append(text)
        try:  # the JSON so far, with the string being written cut where it is
            value = from_json("".join(self.written_text), allow_partial="trailing-strings")
        except ValueError:
            return []
        commands = value.get("commands") if isinstance(value, dict) else None
        if not isinstance(commands, list) or not all(isinstance(command, str) for command in commands):
            return []
        return self._commands(events, commands, complete=False)

    def progress(self, events: Events, arguments: ShellAction) -> list[Event]:
        return self._commands(events, list(arguments.commands), complete=True)

    def _commands(self, events: Events, commands: list[str], complete: bool) -> list[Event]:
        """Events for what is new in `commands`; a command is done once the next one starts (or the call is
        complete)."""
        found: list[Event] = []
        for index in range(self.finished, len(commands)):
            command, common = commands[index], {"output_index": self.output_index, "command_index": index}
            if index == len(self.sent):
                self.sent.append("")
                found.append(events.make(EventType.SHELL_CALL_COMMAND_ADDED, command="", **common))
            if len(command) > len(self.sent[index]) and command.startswith(self.sent[index]):
                found.append(events.make(EventType.SHELL_CALL_COMMAND_DELTA, delta=command[len(self.sent[index]) :], **common))
                self.sent[index] = command
            if complete or index < len(commands) - 1:
                found.append(events.make(EventType.SHELL_CALL_COMMAND_DONE, command=command, **common))
                self.finished = index + 1
        return found

    def as_dict(self) -> ShellCallShape:
        action = self.arguments
        return {
            "id": self.id,
            "type": "shell_call",
            "call_id": self.call_id,
            "action": {
                "commands": list(action.commands) if action else [],
                "timeout_ms": action.timeout_ms if action else None,
                "max_output_length": action.max_output_length if action else None,
            },
            "environment": self.environment,
            "status": self.status,
        }


class ShellCallOutput(OutputItem):
    """What the commands of a call run here wrote, one content per command, and how each ended."""

    type = "shell_call_output"
    id_prefix = "sho"

    def __init__(self, output_index: int, call_id: str, action: ShellAction) -> None:
        super().__init__(output_index)
        self.call_id = call_id
        self.action = action  # the commands to run
        self.output: list[Event] = []

    def opened(self, events: Events) -> list[Event]:
        return [self.added(events)]

    def delta(self, events: Events, command_index: int, stream: Literal["stdout", "stderr"], text: str) -> Event:
        ids = {"item_id": self.id, "output_index": self.output_index}
        return events.make(EventType.SHELL_CALL_OUTPUT_CONTENT_DELTA, **ids, command_index=command_index, delta={stream: text})

    def command_done(self, events: Events, command_index: int, content: Event) -> Event:
        self.output.append(content)
        ids = {"item_id": self.id, "output_index": self.output_index}
        return events.make(EventType.SHELL_CALL_OUTPUT_CONTENT_DONE, **ids, command_index=command_index, output=[content])

    def closed(self, events: Events, status: ItemStatus = ItemStatus.COMPLETED) -> list[Event]:
        self.status = status
        return [self.done(events)]

    def as_dict(self) -> ShellCallOutputShape:
        return {
            "id": self.id,
            "type": "shell_call_output",
            "call_id": self.call_id,
            "output": list(self.output),
            "max_output_length": self.action.max_output_length,
            "status": self.status,
        }
