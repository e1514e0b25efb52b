"""The request's shapes of the shell and the tools the client runs on its own machine: `shell` (run by
the client with a `local` environment, or here in a container), `local_shell` and `apply_patch`; their
`tool_choice` forms; and their calls and outputs as input items, as the openai SDK writes them
(`openai/types/responses/`)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Union

from pydantic import Field, model_validator

from ...core.models import StrictModel
from ...files.network import NetworkPolicy
from ...protocol import ItemStatus

SHELL_NAMESPACE = "shell"  # the Harmony recipient of the model's shell calls: shell.exec
APPLY_PATCH_NAMESPACE = "apply_patch"  # and of its edits: apply_patch.apply_patch
LOCAL_SHELL_NAMESPACE = "local_shell"  # and of its argv commands: local_shell.exec
SHELL_RECIPIENT = f"{SHELL_NAMESPACE}.exec"
LOCAL_SHELL_RECIPIENT = f"{LOCAL_SHELL_NAMESPACE}.exec"
APPLY_PATCH_RECIPIENT = f"{APPLY_PATCH_NAMESPACE}.apply_patch"
MAX_COMMANDS = 64  # commands in one shell call
MAX_OUTPUT_CHARS = 1_000_000  # of one command's stdout or stderr, as a client reports it

# Who may call a tool: the model, directly. OpenAI's programmatic callers (code that calls tools) run nowhere here.
DirectCallers = list[Literal["direct"]]


class LocalSkill(StrictModel):
    """A skill on the client's machine: the model is told its name, description and where it is."""

    name: str = Field(max_length=200)
    description: str = Field(max_length=2000)
    path: str = Field(max_length=2000)


class LocalEnvironment(StrictModel):
    type: Literal["local"]
    skills: list[LocalSkill] | None = Field(None, max_length=100)


class SkillReference(StrictModel):
    """A skill of the Skills API, at a version (a number, `latest`; none: its default)."""

    type: Literal["skill_reference"]
    skill_id: str = Field(max_length=100)
    version: str | None = Field(None, max_length=20)


class InlineSkillSource(StrictModel):
    type: Literal["base64"]
    media_type: Literal["application/zip"]
    data: str = Field(max_length=12 * 1024 * 1024)  # base64 of a zip: the bundle's limits are checked on it


class InlineSkill(StrictModel):
    """A skill sent with the request, as a zipped bundle (its SKILL.md names it)."""

    type: Literal["inline"]
    name: str = Field(max_length=64)
    description: str = Field(max_length=1024)
    source: InlineSkillSource


class ContainerAutoEnvironment(StrictModel):
    """The conversation's container (made when first used), which the code interpreter shares."""

    type: Literal["container_auto"]
    file_ids: list[Annotated[str, Field(max_length=100)]] = Field([], max_length=100)  # uploads copied into /mnt/data
    memory_limit: Literal["1g", "4g", "16g", "64g"] | None = None
    network_policy: NetworkPolicy | None = None  # checked when the tool is prepared (tools/shell_hosted.py)
    skills: list[Annotated[Union[SkillReference, InlineSkill], Field(discriminator="type")]] | None = Field(None, max_length=20)


class ContainerReferenceEnvironment(StrictModel):
    """A container of the Containers API."""

    type: Literal["container_reference"]
    container_id: str = Field(max_length=100)


HostedEnvironment = Union[ContainerAutoEnvironment, ContainerReferenceEnvironment]


class ShellTool(StrictModel):
    """`shell`: run by the client (`environment` `local`, the Agents SDK's default) or in a container here."""

    type: Literal["shell"]
    environment: Annotated[Union[LocalEnvironment, ContainerAutoEnvironment, ContainerReferenceEnvironment], Field(discriminator="type")] | None = (
        None
    )
    allowed_callers: DirectCallers | None = None


class LocalShellTool(StrictModel):
    type: Literal["local_shell"]


class ApplyPatchTool(StrictModel):
    type: Literal["apply_patch"]
    allowed_callers: DirectCallers | None = None


class NamedShell(StrictModel):
    type: Literal["shell"]


class NamedApplyPatch(StrictModel):
    type: Literal["apply_patch"]


# -- calls and outputs sent back as input ------------------------------------------------------------------


class CallerRef(StrictModel):
    type: Literal["direct", "program"]
    caller_id: str | None = None


class ShellAction(StrictModel):
    commands: list[str] = Field(min_length=1, max_length=MAX_COMMANDS)
    timeout_ms: int | None = Field(None, ge=0)
    max_output_length: int | None = Field(None, ge=0)

    def arguments(self) -> str:
        """The call's arguments as the model writes them to `shell.exec`."""
        return json.dumps(self.model_dump(exclude_none=True))


class ShellCallItem(StrictModel):
    type: Literal["shell_call"]
    id: str | None = None
    call_id: str
    action: ShellAction
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    environment: dict[str, Any] | None = None
    caller: CallerRef | None = None
    created_by: str | None = None

    def arguments(self) -> str:
        return self.action.arguments()


class OutcomeExit(StrictModel):
    type: Literal["exit"]
    exit_code: int


class OutcomeTimeout(StrictModel):
    type: Literal["timeout"]


class ShellOutputContent(StrictModel):
    stdout: str = Field(max_length=MAX_OUTPUT_CHARS)
    stderr: str = Field(max_length=MAX_OUTPUT_CHARS)
    outcome: Union[OutcomeExit, OutcomeTimeout] = Field(discriminator="type")
    created_by: str | None = None


class ShellCallOutputItem(StrictModel):
    type: Literal["shell_call_output"]
    id: str | None = None
    call_id: str
    output: list[ShellOutputContent] = Field(max_length=MAX_COMMANDS)
    max_output_length: int | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    caller: CallerRef | None = None
    created_by: str | None = None
    # What the Agents SDK keeps on the item it sends back: echoed, ignored.
    shell_output: Any = Field(None, exclude=True)
    provider_data: Any = Field(None, exclude=True)

    def text(self) -> str:
        return describe_outputs(self.output)


def describe_outputs(output: list[ShellOutputContent]) -> str:
    """What the model reads of a shell call's output: each command's output and how it ended."""
    parts = []
    for index, content in enumerate(output):
        ended = f"exit code {content.outcome.exit_code}" if isinstance(content.outcome, OutcomeExit) else "timed out"
        part = f"[command {index + 1}: {ended}]"
        if content.stdout:
            part += f"\n{content.stdout.rstrip()}"
        if content.stderr:
            part += f"\n[stderr]\n{content.stderr.rstrip()}"
        parts.append(part)
    return "\n".join(parts) if parts else "[no output]"


class LocalShellAction(StrictModel):
    """One program to run (`command` is its argv), as `local_shell_call.action` has it."""

    type: Literal["exec"] = "exec"
    command: list[Annotated[str, Field(max_length=100_000)]] = Field(min_length=1, max_length=1000)
    env: dict[str, str] = Field(default_factory=dict, max_length=100)
    timeout_ms: int | None = Field(None, ge=0)
    user: str | None = None
    working_directory: str | None = Field(None, max_length=4096)

    def arguments(self) -> str:
        return json.dumps(self.model_dump(exclude_none=True, exclude={"type"}))


class LocalShellCallItem(StrictModel):
    type: Literal["local_shell_call"]
    id: str | None = None
    call_id: str
    action: LocalShellAction
    status: Literal["in_progress", "completed", "incomplete"] | None = None

    def arguments(self) -> str:
        return self.action.arguments()


class LocalShellCallOutputItem(StrictModel):
    """OpenAI's type names the call by `id`; the Agents SDK sends `call_id`: either is read."""

    type: Literal["local_shell_call_output"]
    id: str | None = None
    call_id: str | None = None
    output: str = Field(max_length=MAX_OUTPUT_CHARS)
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    provider_data: Any = Field(None, exclude=True)

    @model_validator(mode="after")
    def _names_its_call(self) -> "LocalShellCallOutputItem":
        if self.call_id is None and self.id is None:
            raise ValueError("a local_shell_call_output names its call by call_id (or id)")
        return self

    @property
    def answers(self) -> str:
        return self.call_id if self.call_id is not None else str(self.id)

    def text(self) -> str:
        return self.output


class PatchOperation(StrictModel):
    type: Literal["create_file", "update_file", "delete_file"]
    path: str = Field(min_length=1, max_length=4096)
    diff: str | None = Field(None, max_length=1_000_000)


class ApplyPatchCallItem(StrictModel):
    type: Literal["apply_patch_call"]
    id: str | None = None
    call_id: str
    operation: PatchOperation
    status: Literal["in_progress", "completed"] | None = None
    caller: CallerRef | None = None
    created_by: str | None = None

    def arguments(self) -> str:
        return json.dumps(self.operation.model_dump(exclude_none=True))


class ApplyPatchCallOutputItem(StrictModel):
    type: Literal["apply_patch_call_output"]
    id: str | None = None
    call_id: str
    status: Literal["completed", "failed"]
    output: str | None = Field(None, max_length=MAX_OUTPUT_CHARS)
    caller: CallerRef | None = None
    created_by: str | None = None
    provider_data: Any = Field(None, exclude=True)

    def text(self) -> str:
        head = "The patch was applied." if self.status == ItemStatus.COMPLETED.value else "The patch failed."
        return f"{head}\n{self.output}" if self.output else head
