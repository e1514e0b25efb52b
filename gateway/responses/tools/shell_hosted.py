"""The shell run here (`environment` `container_auto` or `container_reference`): the model's commands run in
bash in the response's container, the same sandbox session and /mnt/data as the code interpreter's. The
call streams as a `shell_call` item, then a `shell_call_output` item whose stdout and stderr arrive while
each command runs; the model reads the output and goes on."""

from __future__ import annotations

import logging

from sandbox.descriptions import describe_shell_tool
from sandbox.manager import BACKEND_ERRORS, SandboxFull, SessionNotFound, ShellCommand, ShellEnd, ShellOutput

from ...core.ids import new_id
from ...errors import bad_request
from ...files.network import checked_policy
from ...files.requested import AutoContainer
from ...files.service import check_memory_limit
from ...protocol import ItemStatus
from ..events.tool_call import ToolCall
from ..history.dialog import Dialog
from ..shapes.items import Event
from ..shapes.shell_models import (
    ContainerAutoEnvironment,
    HostedEnvironment,
    OutcomeExit,
    OutcomeTimeout,
    ShellAction,
    ShellOutputContent,
    describe_outputs,
)
from .base import ToolContext
from .containers import ContainerState, ContainerUse
from .shell_items import ShellCall, ShellCallOutput
from .shell_skills import ContainerSkill, WithSkills, describe_skills, find_skills

log = logging.getLogger("gateway.shell")


class HostedShell:
    def __init__(self, context: ToolContext, environment: HostedEnvironment, param: str) -> None:
        self.context = context
        self.environment = environment
        self.param = param  # the environment's place in the request, for errors
        self.container: ContainerUse | None = None  # from prepare()
        self.skills: list[ContainerSkill] = []  # installed before the commands run

    async def prepare(self, dialog: Dialog, provision: bool) -> None:
        """The container the commands will run in: the one named, or the conversation's (made when first
        used), with the auto container's `file_ids` copied in."""
        environment, param = self.environment, self.param
        sandbox = self.context.services.sandbox
        if sandbox is None:
            raise bad_request(
                "The hosted shell is not enabled on this gateway (no sandbox is configured): use the environment 'local'.", param=f"{param}.type"
            )
        named: str | AutoContainer
        if isinstance(environment, ContainerAutoEnvironment):
            network = checked_policy(environment.network_policy, sandbox.config.network, f"{param}.network_policy")
            if environment.skills:
                self.skills = await find_skills(self.context.services.skills, self.context.tenant, environment.skills, f"{param}.skills")
            check_memory_limit(environment.memory_limit, sandbox.config.memory, f"{param}.memory_limit")
            named = AutoContainer(type="auto", file_ids=environment.file_ids, memory_limit=environment.memory_limit, network_policy=network)
        else:
            named = environment.container_id
        self.container = await self.context.containers.open(named, param, dialog.tool_state(ContainerState).container_id, provision)

    def description(self) -> str:
        sandbox = self.context.services.sandbox
        assert sandbox is not None and self.container is not None  # prepared
        described = describe_shell_tool(sandbox.config, sandbox.backend.data_dir, self.container.known_paths(), self.container.network_access())
        return described + describe_skills(self.skills)

    def make_call(self, output_index: int) -> ShellCall:
        """The call's item, opened as the model starts writing it."""
        assert self.container is not None  # prepared
        return ShellCall(output_index, new_id("call"), {"type": "container_reference", "container_id": self.container.container_id})

    def accepted(self, call: ToolCall, dialog: Dialog, arguments: ShellAction) -> list[Event]:
        """The call as written (its item, whole) and its output item, open while the commands run."""
        output = self.context.output
        shell_call = call.item if isinstance(call.item, ShellCall) else output.add(self.make_call)
        events = shell_call.written(output.events, arguments)
        dialog.claim(len(dialog.messages) - 1, shell_call.id)  # the call's message, just appended
        result = call.item = output.add(lambda index: ShellCallOutput(index, shell_call.call_id, arguments))
        dialog.owner = result.id  # and the tool's answer, to come
        return [*events, *result.opened(output.events)]

    async def run(self, call: ToolCall, dialog: Dialog, arguments: ShellAction) -> None:
        item, sandbox, output = call.item, self.context.services.sandbox, self.context.output
        assert isinstance(item, ShellCallOutput) and sandbox is not None and self.container is not None
        timeout_s = arguments.timeout_ms / 1000 if arguments.timeout_ms is not None else None
        commands = [ShellCommand(command, timeout_s, arguments.max_output_length) for command in arguments.commands]

        def stream(index: int, written: ShellOutput) -> None:
            output.emit([item.delta(output.events, index, written.stream, written.text)])

        container = await self.container.made()
        files = WithSkills(self.skills, container)
        try:
            ended = await sandbox.shell(
                self.container.container_id, commands, self.context.tenant, stream,
                files=files, idle_ttl_s=container.container.idle_minutes * 60, network=container.network_grant(),
            )  # fmt: skip
            status, notes = ItemStatus.COMPLETED, [*files.notes, *container.take_notes()]
        except (SandboxFull, SessionNotFound, *BACKEND_ERRORS) as exc:
            log.warning("the shell could not run in %s: %s", self.container.container_id, exc)
            ended, status, notes = [], ItemStatus.INCOMPLETE, [f"[The commands could not be run: {_reason(exc, self.container.container_id)}.]"]
        contents = [_content(end) for end in ended]
        output.emit([item.command_done(output.events, index, content.model_dump(exclude_none=True)) for index, content in enumerate(contents)])
        output.emit(item.closed(output.events, status))
        dialog.tool_state(ContainerState).container_id = self.container.container_id  # the conversation's container from now on
        call.output = "\n".join([describe_outputs(contents) if contents else "[no output]", *notes])


def _content(end: ShellEnd) -> ShellOutputContent:
    outcome = OutcomeExit(type="exit", exit_code=end.exit_code) if end.exit_code is not None else OutcomeTimeout(type="timeout")
    return ShellOutputContent(stdout=end.stdout, stderr=end.stderr, outcome=outcome)


def _reason(exc: Exception, container_id: str) -> str:
    if isinstance(exc, SessionNotFound):
        return f"container '{container_id}' was not found"
    return str(exc) or type(exc).__name__
