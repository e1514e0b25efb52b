"""The shell's output items: the `shell_call` the model writes (run by the client or here), and the
`shell_call_output` of a call run here, whose stdout and stderr stream while each command runs."""

from __future__ import annotations

from typing import Any, Literal

from ..items import Event, Events, OutputItem
from ..shell_models import ShellAction
from .client_actions import ClientActionItem


class ShellCall(ClientActionItem[ShellAction]):
    type = "shell_call"
    id_prefix = "sh"

    def __init__(self, output_index: int, call_id: str, environment: dict[str, Any] | None) -> None:
        super().__init__(output_index, call_id)
        self.environment = environment  # `local`, or the container it runs in

    def progress(self, events: Events, arguments: ShellAction) -> list[Event]:
        found: list[Event] = []
        for index, command in enumerate(arguments.commands):
            common = {"output_index": self.output_index, "command_index": index}
            found.append(events.make("response.shell_call_command.added", command="", **common))
            found.append(events.make("response.shell_call_command.delta", delta=command, **common))
            found.append(events.make("response.shell_call_command.done", command=command, **common))
        return found

    def as_dict(self) -> Event:
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
        return events.make("response.shell_call_output_content.delta", **ids, command_index=command_index, delta={stream: text})

    def command_done(self, events: Events, command_index: int, content: Event) -> Event:
        self.output.append(content)
        ids = {"item_id": self.id, "output_index": self.output_index}
        return events.make("response.shell_call_output_content.done", **ids, command_index=command_index, output=[content])

    def closed(self, events: Events, status: str = "completed") -> list[Event]:
        self.status = status
        return [self.done(events)]

    def as_dict(self) -> Event:
        return {
            "id": self.id,
            "type": "shell_call_output",
            "call_id": self.call_id,
            "output": list(self.output),
            "max_output_length": self.action.max_output_length,
            "status": self.status,
        }
