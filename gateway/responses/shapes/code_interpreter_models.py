"""The code_interpreter's items as a client sends them back: the openai SDK's
`ResponseCodeInterpreterToolCallParam`, field for field (clients replay a response's output as input)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from ...core.models import StrictModel


class CodeOutputLogs(StrictModel):
    type: Literal["logs"]
    logs: str


class CodeOutputImage(StrictModel):
    type: Literal["image"]
    url: str


CodeOutput = Annotated[Union[CodeOutputLogs, CodeOutputImage], Field(discriminator="type")]


class CodeInterpreterCallItem(StrictModel):
    type: Literal["code_interpreter_call"]
    id: str | None = None
    code: str | None = None
    container_id: str | None = None
    outputs: list[CodeOutput] | None = None  # None: the response was not asked to include them
    status: Literal["in_progress", "completed", "incomplete", "interpreting", "failed"] | None = None

    def logs(self) -> str | None:
        """What the code printed, as the model read it; None when the outputs were not sent back."""
        if self.outputs is None:
            return None
        return "\n".join(output.logs for output in self.outputs if isinstance(output, CodeOutputLogs))
