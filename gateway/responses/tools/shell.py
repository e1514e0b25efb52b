"""`shell`: the model writes commands to `shell.exec`, and the call streams as a `shell_call` item (each
command `added`, `delta`, `done`). With `environment: {"type": "local"}` (or none) the client runs them and
answers with a `shell_call_output`; with a container environment they run here (shell_hosted.py). gpt-oss
was not trained on a shell tool: it is declared as a namespace of one function, described the way the
python tool is."""

from __future__ import annotations

from typing import Any

from ..events.tool_call import ToolCall
from ..history.dialog import Dialog
from ..shapes.items import Event
from ..shapes.shell_models import (
    SHELL_NAMESPACE,
    SHELL_RECIPIENT,
    ContainerAutoEnvironment,
    ContainerReferenceEnvironment,
    LocalEnvironment,
    NamedShell,
    ShellAction,
    ShellCallItem,
    ShellCallOutputItem,
    ShellTool,
)
from .base import ToolContext, owed_output
from .client_actions import ClientAction, action_call_reader, action_output_reader
from .shell_hosted import HostedShell
from .shell_items import ShellCall, ShellCallOutput
from .shell_skills import skill_line

DESCRIPTION = (
    "Use this tool to run shell commands on the user's machine, when running a command is the best way to "
    "do what is asked. Commands run one after another in a POSIX shell; each one's stdout, stderr and exit "
    "code come back in the tool's answer."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "commands": {"type": "array", "items": {"type": "string"}, "description": "The commands to run, in order."},
        "timeout_ms": {"type": "integer", "description": "How long each command may run, in milliseconds."},
        "max_output_length": {"type": "integer", "description": "The most characters of output to return per command."},
    },
    "required": ["commands"],
}


class Shell(ClientAction[ShellTool]):
    request_types = (ShellTool,)
    namespaces = frozenset({SHELL_NAMESPACE})
    choices = (NamedShell,)
    metric = "shell"
    produces = (ShellCall, ShellCallOutput)
    reads = {ShellCallItem: action_call_reader(SHELL_RECIPIENT, ShellCall), ShellCallOutputItem: action_output_reader()}
    owes = {"shell_call": owed_output("shell_call_output")}
    function = "exec"
    description = DESCRIPTION
    parameters = PARAMETERS
    arguments_type = ShellAction

    def __init__(self, context: ToolContext, declared: list[ShellTool]) -> None:
        super().__init__(context, declared)
        self.tool = declared[0] if declared else None
        environment = self.tool.environment if self.tool is not None else None
        self.hosted = (
            HostedShell(context, environment, f"{self.param(self.tool)}.environment")
            if self.tool is not None and isinstance(environment, (ContainerAutoEnvironment, ContainerReferenceEnvironment))
            else None
        )

    @property
    def runs_here(self) -> bool:
        return self.hosted is not None

    def annotations(self, text: str) -> list[Event]:
        return self.context.containers.annotations(text) if self.hosted is not None else []

    async def prepare(self, dialog: Dialog, provision: bool) -> None:
        await super().prepare(dialog, provision)
        if self.hosted is not None:
            await self.hosted.prepare(dialog, provision)

    def namespace_description(self) -> str:
        return self.hosted.description() if self.hosted is not None else DESCRIPTION

    def function_description(self) -> str:
        environment = self.tool.environment if self.tool else None
        skills = environment.skills if isinstance(environment, LocalEnvironment) else None
        if not skills:
            return "Run shell commands."
        listed = "\n".join(skill_line(skill.name, skill.description, skill.path) for skill in skills)
        return f"Run shell commands. Skills on this machine:\n{listed}"

    def live_item(self) -> ShellCall | None:
        return self.context.output.add(self.hosted.make_call) if self.hosted is not None else None

    def make_item(self, output_index: int, call_id: str) -> ShellCall:
        return ShellCall(output_index, call_id, {"type": "local"})

    def accepted(self, call: ToolCall, arguments: Any) -> list[Event]:
        if self.hosted is None:
            return super().accepted(call, arguments)
        return self.hosted.accepted(call, self.dialog, arguments)

    async def run(self, call: ToolCall) -> None:
        assert self.hosted is not None and isinstance(call.item, ShellCallOutput)  # only hosted calls run here
        await self.hosted.run(call, self.dialog, call.item.action)
