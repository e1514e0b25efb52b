"""`apply_patch` run by the client: the model writes one file operation to `apply_patch.apply_patch`
(`create_file` or `update_file` with a V4A diff, or `delete_file`), the call streams as an
`apply_patch_call` item, and the client answers with an `apply_patch_call_output`. A diff that breaks V4A's
grammar goes back to the model to write again."""

from __future__ import annotations

from typing import Any

from ...protocol import ItemStatus
from ..shapes.output_items import ApplyPatchCallShape
from ..shapes.shell_models import (
    APPLY_PATCH_NAMESPACE,
    APPLY_PATCH_RECIPIENT,
    ApplyPatchCallItem,
    ApplyPatchCallOutputItem,
    ApplyPatchTool,
    NamedApplyPatch,
    PatchOperation,
)
from .base import owed_output
from .client_actions import ClientAction, ClientActionItem, action_call_reader, action_output_reader

DESCRIPTION = (
    "Use this tool to create, update or delete a file in the user's workspace. One call makes one "
    "operation. A diff is in the V4A format: for create_file, every line of the new file prefixed with "
    "'+'; for update_file, one or more hunks, each starting with a line '@@ ' followed by a line of the file "
    "that locates it (or just '@@'), then the hunk's lines prefixed with ' ' (kept), '-' (removed) or '+' "
    "(added), with three lines of context around each change."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": ["create_file", "update_file", "delete_file"]},
        "path": {"type": "string", "description": "The file's path, relative to the workspace."},
        "diff": {"type": "string", "description": "The V4A diff (not for delete_file)."},
    },
    "required": ["type", "path"],
}
END_OF_FILE = "*** End of File"


def diff_problem(operation: PatchOperation) -> str | None:
    """Why the operation's diff is not V4A (None: it is)."""
    if "\0" in operation.path:
        return "the path holds a NUL character"
    if operation.type == "delete_file":
        return None
    if not operation.diff:
        return f"a {operation.type} operation needs a diff"
    lines = operation.diff.split("\n")
    if lines[-1] == "":
        lines.pop()
    if operation.type == "create_file":
        for number, line in enumerate(lines, 1):
            if not line.startswith("+"):
                return f"line {number} of the diff does not start with '+': every line of a new file is added"
        return None
    changed = False
    for number, line in enumerate(lines, 1):
        if line.startswith(("+", "-")):
            changed = True
        elif not (line == "" or line.startswith((" ", "@@")) or line == END_OF_FILE):
            return f"line {number} of the diff starts with neither ' ', '+', '-' nor '@@'"
    return None if changed else "the diff changes no line"


class ApplyPatchCall(ClientActionItem[PatchOperation]):
    type = "apply_patch_call"
    id_prefix = "apc"

    def as_dict(self) -> ApplyPatchCallShape:
        operation = self.arguments
        return {
            "id": self.id,
            "type": "apply_patch_call",
            "call_id": self.call_id,
            "operation": operation.model_dump(exclude_none=True) if operation else None,
            "status": ItemStatus.COMPLETED if self.status == ItemStatus.COMPLETED else ItemStatus.IN_PROGRESS,
        }


class ApplyPatch(ClientAction[ApplyPatchTool]):
    request_types = (ApplyPatchTool,)
    namespaces = frozenset({APPLY_PATCH_NAMESPACE})
    choices = (NamedApplyPatch,)
    metric = "apply_patch"
    produces = (ApplyPatchCall,)
    reads = {ApplyPatchCallItem: action_call_reader(APPLY_PATCH_RECIPIENT, ApplyPatchCall), ApplyPatchCallOutputItem: action_output_reader()}
    owes = {"apply_patch_call": owed_output("apply_patch_call_output")}
    function = "apply_patch"
    description = DESCRIPTION
    parameters = PARAMETERS
    arguments_type = PatchOperation

    def make_item(self, output_index: int, call_id: str) -> ApplyPatchCall:
        return ApplyPatchCall(output_index, call_id)

    def problem(self, arguments: Any) -> str | None:
        assert isinstance(arguments, PatchOperation)
        return diff_problem(arguments)
