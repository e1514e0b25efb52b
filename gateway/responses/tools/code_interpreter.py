"""`code_interpreter`: gpt-oss's `python` tool, run in the gateway's sandbox, in the container of the
conversation (or the one the request names), with the container's files in /mnt/data."""

from __future__ import annotations

import logging
from typing import Any, Iterable

from openai_harmony import Message, Role

from sandbox.descriptions import describe_python_tool
from sandbox.manager import BACKEND_ERRORS, Execution, SandboxFull, SessionNotFound

from ...engine.harmony import ToolNamespaceConfig
from ...errors import bad_request
from ...files.network import checked_policy
from ...files.service import check_memory_limit
from ...files.sync import ContainerSync
from ...protocol import EventType, Include, ItemStatus
from ..events.tool_call import CallKind, ToolCall
from ..history.dialog import Dialog, Records, tool_result
from ..shapes.code_interpreter_models import CodeInterpreterCallItem
from ..shapes.items import Event, Events, OutputItem, ToolCallItem
from ..shapes.output_items import CodeInterpreterCallShape
from ..shapes.request import NamedCodeInterpreter, ToolChoiceForm
from ..shapes.tool_models import CodeInterpreterTool, RequestTool
from .base import Declarations, Tool, ToolContext
from .containers import ContainerState, ContainerUse

log = logging.getLogger("gateway.python")

STATE_LOST = "[The Python session was restarted: variables, imports and files from earlier calls are gone.]"


class CodeInterpreterCallOutput(ToolCallItem):
    """A call to `python`; `interpreting` while the sandbox runs it."""

    type = "code_interpreter_call"
    id_prefix = "ci"
    input_field = "code"
    delta_type = EventType.CODE_INTERPRETER_CALL_CODE_DELTA
    done_type = EventType.CODE_INTERPRETER_CALL_CODE_DONE
    in_progress_type = EventType.CODE_INTERPRETER_CALL_IN_PROGRESS
    completed_type = EventType.CODE_INTERPRETER_CALL_COMPLETED
    running_status = ItemStatus.INTERPRETING

    def __init__(self, output_index: int, container_id: str, show_outputs: bool = True) -> None:
        self.container_id = container_id
        self.outputs: list[Event] = []
        self.show_outputs = show_outputs  # `include: ["code_interpreter_call.outputs"]`; else null, as OpenAI
        super().__init__(output_index)

    def running(self, events: Events) -> list[Event]:
        return [self._event(events, EventType.CODE_INTERPRETER_CALL_INTERPRETING)]

    def as_dict(self) -> CodeInterpreterCallShape:
        return {
            "id": self.id,
            "type": "code_interpreter_call",
            "status": self.status,
            "code": self.input_text,
            "container_id": self.container_id,
            "outputs": self.outputs if self.show_outputs else None,
        }


NO_OUTPUTS = "[The output of this call was not sent back.]"


def _read_call(dialog: Dialog, index: int, item: CodeInterpreterCallItem, records: Records) -> None:
    """A python call sent back (a client replaying a response's output): the code the model wrote, and
    what it printed, as the model read them."""
    call = Message.from_role_and_content(Role.ASSISTANT, item.code or "").with_channel("analysis").with_recipient("python")
    dialog.append(call.with_content_type("code"))
    logs = item.logs()
    dialog.append(tool_result("python", "analysis", NO_OUTPUTS if logs is None else logs))
    records.append(item.model_dump(exclude_none=True) | {"id": item.id or CodeInterpreterCallOutput.fresh_id()})


class CodeInterpreter(Tool[CodeInterpreterTool]):
    request_types = (CodeInterpreterTool,)
    namespaces = frozenset({"python"})
    includes = (Include.CODE_OUTPUTS,)
    choices = (NamedCodeInterpreter,)
    metric = "python"
    produces = (CodeInterpreterCallOutput,)
    reads = {CodeInterpreterCallItem: _read_call}

    def __init__(self, context: ToolContext, declared: list[CodeInterpreterTool]) -> None:
        super().__init__(context, declared)
        self.tool: CodeInterpreterTool | None = self.declared[0] if self.declared else None
        config = self.context.services.config.server
        self.show_outputs = self.context.includes(Include.CODE_OUTPUTS) or config.always_include_code_outputs
        self.container: ContainerUse | None = None  # from prepare()

    @staticmethod
    def matches(tool: RequestTool, ref: dict[str, Any]) -> bool:
        return ref.get("type") == "code_interpreter"

    def annotations(self, text: str) -> list[Event]:
        return self.context.containers.annotations(text) if self.container is not None else []

    async def prepare(self, dialog: Dialog, provision: bool) -> None:
        """The container the code will run in: the one named, or (auto) the conversation's, or a new one;
        the auto container's `file_ids` are copied into it now (not when the prompt is only counted)."""
        await super().prepare(dialog, provision)
        tool = self.tool
        if tool is None:
            return
        sandbox = self.context.services.sandbox
        param = self.param(tool)
        if sandbox is None:
            raise bad_request("The code_interpreter tool is not enabled on this gateway (no sandbox is configured).", param=f"{param}.type")
        named = tool.container
        if not isinstance(named, str):
            check_memory_limit(named.memory_limit, sandbox.config.memory, f"{param}.container.memory_limit")
            network = checked_policy(named.network_policy, sandbox.config.network, f"{param}.container.network_policy")
            named = named.model_copy(update={"network_policy": network})
        self.container = await self.context.containers.open(named, f"{param}.container", dialog.tool_state(ContainerState).container_id, provision)

    def recipients(self) -> Iterable[str]:
        return self.namespaces if self.tool is not None else ()

    def check_choice(self, choice: ToolChoiceForm) -> None:
        if self.tool is None:
            raise bad_request("tool_choice is code_interpreter, which is not in tools.", param="tool_choice.type")

    def forced_header(self, choice: str | ToolChoiceForm) -> str | None:
        return "<|channel|>analysis to=python code<|message|>" if isinstance(choice, NamedCodeInterpreter) else None

    def declare(self, declarations: Declarations) -> None:
        sandbox = self.context.services.sandbox
        if self.tool is not None and sandbox is not None and self.context.enabled:
            known = self.container.known_paths() if self.container is not None else []
            network = self.container.network_access() if self.container is not None else None
            description = describe_python_tool(sandbox.config, sandbox.backend.data_dir, known, network)
            declarations.system.append(ToolNamespaceConfig(name="python", description=description, tools=[]))

    def open_call(self, call: ToolCall, name: str) -> OutputItem | None:
        if call.recipient != "python" or not self.context.enabled:
            return super().open_call(call, name)
        if not self.context.budget.take(call):
            return None
        container_id = self.container.container_id if self.container is not None else ""
        item = self.context.output.add(lambda index: CodeInterpreterCallOutput(index, container_id, self.show_outputs))
        call.claim(self, CallKind.HOSTED, item)
        return item

    async def written(self, call: ToolCall, text: str) -> list[Event]:
        assert isinstance(call.item, CodeInterpreterCallOutput)
        return call.item.written(self.context.output.events)  # open while it runs

    async def run(self, call: ToolCall) -> None:
        item, sandbox = call.item, self.context.services.sandbox
        assert isinstance(item, CodeInterpreterCallOutput) and sandbox is not None  # claimed only with a sandbox
        # The conversation ran code in this container (or in one that expired): a session started anew lost its state.
        assert self.container is not None  # prepared
        state = self.dialog.tool_state(ContainerState)
        resumed = state.container_id == item.container_id or self.container.replaced
        status, item.outputs, call.output = await self._execute(item, resumed, await self.container.made())
        state.container_id = item.container_id
        output = self.context.output
        output.emit(item.finished(output.events, status))

    async def resume(self, call: ToolCall) -> None:
        """The code was running when its replica stopped: its kernel, on the shared Docker daemon, ran on
        and kept the result, which is collected here (once the code ended); it never runs twice."""
        item, sandbox = call.item, self.context.services.sandbox
        assert isinstance(item, CodeInterpreterCallOutput) and sandbox is not None and self.container is not None
        self.dialog.tool_state(ContainerState).container_id = item.container_id  # it ran, or runs, there: the conversation goes on in it
        container = await self.container.made()
        try:
            collected = await sandbox.collect(
                item.container_id, item.id, self.context.tenant, files=container, idle_ttl_s=container.container.idle_minutes * 60,
                network=container.network_grant(),
            )  # fmt: skip
        except BACKEND_ERRORS + (SandboxFull, SessionNotFound) as exc:
            log.warning("sandbox session %s: the result of %s could not be collected: %s", item.container_id, item.id, exc)
            collected = None
        if collected is None:  # the kernel is gone, or does not have it: what became of the code is not known
            await super().resume(call)
            return
        status, item.outputs, call.output = _described(collected, container)
        output = self.context.output
        output.emit(item.finished(output.events, status))

    async def _execute(self, item: CodeInterpreterCallOutput, resumed: bool, container: ContainerSync) -> tuple[ItemStatus, list[Event], str]:
        """Run the code in its container's session: the item's status and outputs, and what the model reads.
        The execution is named by the item's id, for another replica to collect if this one stops."""
        sandbox = self.context.services.sandbox
        assert sandbox is not None
        idle_ttl_s = container.container.idle_minutes * 60

        def cancelled(execution: Execution) -> None:  # the item ends incomplete, with what the code printed
            _, item.outputs, _ = _described(execution, container)

        try:
            execution = await sandbox.execute(
                item.container_id,
                item.text,
                resumed,
                self.context.tenant,
                files=container,
                idle_ttl_s=idle_ttl_s,
                token=item.id,
                on_cancel=cancelled,
                network=container.network_grant(),
            )
        except SandboxFull as exc:
            return _failed(f"Error: {exc}.")
        except SessionNotFound:
            return _failed(f"Error: container '{item.container_id}' was not found.")
        except BACKEND_ERRORS as exc:  # the backend could not start a kernel: report it, keep the response alive
            log.exception("sandbox failure in session %s", item.container_id)
            return _failed(f"Error: the Python sandbox could not run the code ({exc}).")
        return _described(execution, container)


def _described(execution: Execution, container: ContainerSync) -> tuple[ItemStatus, list[Event], str]:
    """An execution as the item shows it and the model reads it: its status, outputs and text."""
    lines = [STATE_LOST] if execution.state_lost else []
    lines.append(execution.output.rstrip("\n") if execution.output.strip() else "[no output]")
    lines += container.take_notes()
    if execution.images:
        lines.append(f"[{len(execution.images)} image(s) shown to the user]")
    text = "\n".join(lines)
    outputs: list[Event] = [{"type": "logs", "logs": text}]
    outputs += [{"type": "image", "url": f"data:image/png;base64,{image}"} for image in execution.images]
    return (ItemStatus.FAILED if execution.status == "restarted" else ItemStatus.COMPLETED), outputs, text


def _failed(text: str) -> tuple[ItemStatus, list[Event], str]:
    return ItemStatus.FAILED, [{"type": "logs", "logs": text}], text
