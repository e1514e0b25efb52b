"""A message of the model's addressed to a tool, and what the run loop knows of it.

The call is created when its header (`to=RECIPIENT`) arrives. It is then claimed by the tool that answers
that recipient (tools/: a client function, the python sandbox, an MCP server...), or refused, and may
later be found unusable (arguments that are not JSON, a grammar broken). Its kind decides what the loop
does once the engine stops at `<|call|>`: run it here and go on, or end the response for the client to act.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from ..shapes.items import OutputItem
from .log import Batch


class CallTaker(Protocol):
    """What a call knows of the tool that claimed it (tools/base.py's `Tool` is one)."""

    @property
    def metric(self) -> str: ...  # its calls' label in the tool-call metrics

    async def written(self, call: ToolCall, text: str) -> Batch: ...

    async def run(self, call: ToolCall) -> None: ...

    async def resume(self, call: ToolCall) -> None: ...


class CallKind(enum.Enum):
    UNCLAIMED = "unknown"  # no declared tool has the recipient; `output` tells the model so
    CLIENT = "function"  # the client runs it: the response ends with it
    HOSTED = "hosted"  # the gateway runs it, and the loop goes on
    APPROVAL = "approval"  # a call the user approves first: the response ends with the request
    INVALID = "invalid"  # claimed, but not usable as written; `output` tells the model why

    @property
    def ends_response(self) -> bool:
        """The client acts before the conversation goes on."""
        return self in (CallKind.CLIENT, CallKind.APPROVAL)


@dataclass
class ToolCall:
    recipient: str
    channel: str | None
    kind: CallKind = CallKind.UNCLAIMED
    tool: CallTaker | None = None  # the tool that claimed the call
    item: OutputItem | None = None  # the output item that streams the call, when one does
    tool_name: str = ""  # the function of the tool's namespace the call is to
    arguments: str = ""  # hosted calls: the arguments as the model wrote them, once complete
    output: str | None = None  # what the model is told: the tool's output, or why there is none
    broke_grammar: bool = False  # it streamed as the engine's grammar held it, and broke that grammar

    def claim(self, tool: CallTaker, kind: CallKind, item: OutputItem | None = None) -> OutputItem | None:
        """A declared tool takes the call; returns its item."""
        assert self.kind is CallKind.UNCLAIMED and kind not in (CallKind.UNCLAIMED, CallKind.INVALID), f"{self.kind} claimed as {kind}"
        self.tool, self.kind, self.item = tool, kind, item
        return item

    def refuse(self, reason: str) -> None:
        """Nothing takes the call: the model is told why, and the loop goes on."""
        assert self.kind is CallKind.UNCLAIMED, f"a {self.kind} call refused"
        self.output = f"Error: {reason}"

    def invalidate(self, reason: str, held: bool = False) -> None:
        """The claimed call cannot be used as written: the model is told why, to write it again. `held`: the
        engine's grammar held it to what was checked, so the engine broke its grammar (engine_calls.py)."""
        assert self.kind is not CallKind.UNCLAIMED, "an unclaimed call invalidated"
        self.kind, self.output = CallKind.INVALID, f"Error: {reason}"
        self.broke_grammar = held

    @property
    def metric(self) -> str:
        """The call's label in the tool-call metrics: its tool's for a call run here, else its kind."""
        return self.tool.metric if self.kind is CallKind.HOSTED and self.tool is not None else self.kind.value
