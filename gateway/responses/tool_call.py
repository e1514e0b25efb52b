"""A message of the model's addressed to a tool, and what the run loop knows of it.

The call is created when its header (`to=RECIPIENT`) arrives. It is then claimed by whoever declared
that recipient (a client function, the python sandbox, an MCP server), and may later be found unusable
(arguments that are not JSON, a grammar broken). Its kind decides what the loop does once the engine
stops at `<|call|>`: run it here and go on, or end the response for the client to act.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tools.servers import EnabledServer

from .items import OutputItem


class CallKind(enum.Enum):
    UNCLAIMED = "unknown"  # no declared tool has the recipient; `output` tells the model so
    FUNCTION = "function"  # the client's function: the response ends with it
    PYTHON = "python"  # code for the sandbox
    MCP = "mcp"  # a tool of an MCP server, run here
    BROWSER = "browser"  # gpt-oss's browser: search, open, find
    APPROVAL = "approval"  # an MCP call the user approves first: the response ends with the request
    INVALID = "invalid"  # claimed, but not usable as written; `output` tells the model why

    @property
    def ends_response(self) -> bool:
        """The client acts before the conversation goes on."""
        return self in (CallKind.FUNCTION, CallKind.APPROVAL)

    @property
    def hosted(self) -> bool:
        """The gateway handles the call itself (runs it, or asks for approval to)."""
        return self in (CallKind.PYTHON, CallKind.MCP, CallKind.BROWSER, CallKind.APPROVAL)

    @property
    def runs_here(self) -> bool:
        return self in (CallKind.PYTHON, CallKind.MCP, CallKind.BROWSER)


@dataclass
class ToolCall:
    recipient: str
    channel: str | None
    kind: CallKind = CallKind.UNCLAIMED
    item: OutputItem | None = None  # the output item that streams the call, when one does
    server: EnabledServer | None = None  # MCP calls: the server and its tool
    tool_name: str = ""
    arguments: str = ""  # hosted calls: the arguments as the model wrote them, once complete
    output: str | None = None  # what the model is told: the tool's output, or why there is none

    def claim(self, kind: CallKind, item: OutputItem | None = None) -> OutputItem | None:
        """A declared tool takes the call; returns its item."""
        assert self.kind is CallKind.UNCLAIMED and kind is not CallKind.INVALID, f"{self.kind} claimed as {kind}"
        self.kind, self.item = kind, item
        return item

    def refuse(self, reason: str) -> None:
        """Nothing takes the call: the model is told why, and the loop goes on."""
        assert self.kind is CallKind.UNCLAIMED, f"a {self.kind} call refused"
        self.output = f"Error: {reason}"

    def invalidate(self, reason: str) -> None:
        """The claimed call cannot be used as written: the model is told why, to write it again."""
        assert self.kind is not CallKind.UNCLAIMED, "an unclaimed call invalidated"
        self.kind, self.output = CallKind.INVALID, f"Error: {reason}"
