"""`local_shell` run by the client (the Agents SDK's `LocalShellTool`): the model writes one program's argv
to `local_shell.exec`, the call streams as a `local_shell_call` item, and the client answers with a
`local_shell_call_output`."""

from __future__ import annotations

from typing import Any

from ..shapes.output_items import LocalShellCallShape
from ..shapes.shell_models import (
    LOCAL_SHELL_NAMESPACE,
    LOCAL_SHELL_RECIPIENT,
    LocalShellAction,
    LocalShellCallItem,
    LocalShellCallOutputItem,
    LocalShellTool,
)
from .base import owed_output
from .client_actions import ClientAction, ClientActionItem, action_call_reader, action_output_reader

DESCRIPTION = (
    "Use this tool to run a program on the user's machine, when running one is the best way to do what is "
    'asked. Give the program and its arguments as a list (for a shell command: ["bash", "-lc", "..."]); '
    "its output comes back in the tool's answer."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "array", "items": {"type": "string"}, "description": "The program and its arguments."},
        "working_directory": {"type": "string"},
        "timeout_ms": {"type": "integer"},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["command"],
}


class LocalShellCall(ClientActionItem[LocalShellAction]):
    type = "local_shell_call"
    id_prefix = "lsh"

    def as_dict(self) -> LocalShellCallShape:
        action = self.arguments.model_dump() if self.arguments else {"type": "exec", "command": [], "env": {}}
        return {"id": self.id, "type": "local_shell_call", "call_id": self.call_id, "action": action, "status": self.status}


class LocalShell(ClientAction[LocalShellTool]):
    request_types = (LocalShellTool,)
    namespaces = frozenset({LOCAL_SHELL_NAMESPACE})
    metric = "local_shell"
    produces = (LocalShellCall,)
    reads = {
        LocalShellCallItem: action_call_reader(LOCAL_SHELL_RECIPIENT, LocalShellCall),
        LocalShellCallOutputItem: action_output_reader(lambda item: item.answers),
    }
    owes = {"local_shell_call": owed_output("local_shell_call_output")}
    function = "exec"
    description = DESCRIPTION
    parameters = PARAMETERS
    arguments_type = LocalShellAction

    def make_item(self, output_index: int, call_id: str) -> LocalShellCall:
        return LocalShellCall(output_index, call_id)
