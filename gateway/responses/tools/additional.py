"""`additional_tools` items (SDK 3.57): tools offered from their point of the conversation on.

The model reads their declarations where the item stands, in a developer message (the prompt before it
stays as the engine has it cached), and may call them from then on, in this response and those that
continue it: the dialog keeps them with what tool search loaded (loaded.py), read back by the client
tools (client.py). Client tools only (functions, custom tools, namespaces), checked as the request's
own are; a hosted tool is declared with the request's `tools`."""

from __future__ import annotations

from typing import Any

from openai_harmony import Message, Role

from ...core.ids import new_id
from ...errors import bad_request
from ..history.dialog import Dialog, Records
from ..history.tool_declarations import checked_definitions, loaded_record, loaded_text
from ..shapes.input_models import AdditionalToolsItem
from ..shapes.tool_models import CustomTool, GrammarInput
from .loaded import LoadedTools

ADDABLE = ("function", "custom", "namespace")
LEAD = "These tools are available from now on, in addition to those declared before:"


def read_additional_tools(dialog: Dialog, index: int, item: AdditionalToolsItem, records: Records) -> None:
    param = f"input[{index}].tools"
    for position, definition in enumerate(item.tools):
        kind = definition.get("type")
        if kind not in ADDABLE:
            raise bad_request(
                f"A '{kind}' tool cannot be added in the conversation here: declare it in the request's tools "
                f"(additional_tools takes {', '.join(ADDABLE)} tools).",
                param=f"{param}[{position}].type",
            )
    tools = checked_definitions(item.tools, param)
    for position, added in enumerate(tools):
        if isinstance(added, CustomTool) and isinstance(added.format, GrammarInput) and added.format.syntax == "lark":
            raise bad_request(
                "A custom tool with a Lark grammar is declared in the request's tools, not added later.", param=f"{param}[{position}].format"
            )
    dialog.append(Message.from_role_and_content(Role.DEVELOPER, loaded_text(tools, lead=LEAD)))
    dialog.tool_state(LoadedTools).add([loaded_record(tool) for tool in tools])
    records.append(_record(item))


def _record(item: AdditionalToolsItem) -> dict[str, Any]:
    return item.model_dump(exclude_none=True) | {"id": item.id or new_id("at")}
