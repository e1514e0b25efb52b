"""What `configuration_update` items (SDK 3.57) set for the responses that follow them: the reasoning effort
and the answer's format, each until a later update replaces it. Kept in the dialog's state (with a stored
response, and a conversation), and laid over each later request's own `reasoning` and `text` before its
run reads them (loop/run.py): a JSON format is then held by the engine's grammar like any other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ...core.ids import new_id
from ...errors import bad_request
from ..shapes.input_models import ConfigurationUpdateItem
from ..shapes.request import Reasoning, ResponsesRequest, TextConfig, TextFormat
from .dialog import Dialog, Records


@dataclass
class ResponseSettings:
    effort: str | None = None
    text_format: dict[str, Any] | None = None  # as the update gave it (`schema` by its name in the API)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> ResponseSettings:
        settings = stored.get("settings") or {}
        return cls(settings.get("effort"), settings.get("text_format"))

    def to_json(self) -> dict[str, Any]:
        if self.effort is None and self.text_format is None:
            return {}
        return {"settings": {"effort": self.effort, "text_format": self.text_format}}

    def copy(self) -> ResponseSettings:
        return ResponseSettings(self.effort, dict(self.text_format) if self.text_format is not None else None)

    def apply(self, request: ResponsesRequest) -> None:
        """The request's settings, with what the conversation's updates set in their place."""
        if self.effort is not None:
            request.reasoning = (request.reasoning or Reasoning()).model_copy(update={"effort": self.effort})
        if self.text_format is not None:
            text_format = TextFormat.model_validate(self.text_format, strict=False)
            request.text = (request.text or TextConfig()).model_copy(update={"format": text_format})


def read_configuration_update(dialog: Dialog, index: int, item: ConfigurationUpdateItem, records: Records) -> None:
    settings = dialog.tool_state(ResponseSettings)
    if item.reasoning is not None and item.reasoning.effort is not None:
        settings.effort = item.reasoning.effort
    if item.text is not None:
        text_format = item.text.format
        if text_format.type == "json_schema" and text_format.schema_ is None:
            raise bad_request("A json_schema format needs a schema.", param=f"input[{index}].text.format.schema")
        settings.text_format = text_format.model_dump(by_alias=True, exclude_none=True)
    records.append(item.model_dump(by_alias=True, exclude_none=True) | {"id": item.id or new_id("cu")})
