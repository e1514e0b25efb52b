"""The shape every kind of tool has: what the run loop asks of a tool, and what a tool may use.

A kind of tool is one class in one module (functions.py, namespaces.py, code_interpreter.py, mcp.py,
web_search.py), listed once in registry.py. One instance serves one response, for all of the request's
tools of its kind (or none: a kind the request does not declare stays silent). The loop asks it:

- before the first event: `prepare()` (check the request's tools, provision what a run needs, errors are
  HTTP errors), `check_choice()` and `forced_header()` for the `tool_choice` forms it owns, `declare()`
  (how the model reads it: a namespace in the system message, or functions in the developer message);
- before the first engine call: `before_engine()` (work the request itself asks for, e.g. MCP listings);
- for each call the model makes to one of its `recipients()`: `open_call()` when the call's header
  arrives (claim it and open its output item, or refuse it), `written()` when the call's message is
  complete, and `run()` for a call it runs here.

A tool reports what happened through the response's `ResponseOutput` (its items and events); it keeps
what must outlive the response in the `Dialog` it is given. It owns both sides of what it writes: the
output items it `produces`, and how each comes back as input (`reads`: the client sends the history
again, or answers a call), into Harmony messages and the record the API lists.

A new kind of tool, step by step:
1. Its request models (the tool in `tools`, a named `tool_choice` form, the input items it reads) in a
   `*_models.py` module in shapes/, beside request.py, added to request.py's unions.
2. One module here with its `Tool` subclass: the class attributes below, `declare()`, `open_call()` and
   `run()` (or `ClientAction` for a function the client runs, `ClientTools` for the client's functions),
   and `call_shapes()` where its calls have names and arguments the engine's grammar should hold the
   model to (the default allows any name in its namespaces, with any text).
3. Its output items (`OutputItem` subclasses) and their events, listed in `produces`; for each of them,
   an input reader in `reads` (tests/test_tool_registry.py fails for an item nothing reads back).
4. One line in registry.py's `TOOLS`: the request's rules (`include`, `tool_choice`, reserved names,
   input readers) are derived from there.
5. Tests through the public API: a call streamed, run, its output read by the model, and the history sent
   back to continue from.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, ClassVar, Generic, Iterable, Mapping, Protocol, Sequence, TypeAlias, TypeVar

from pydantic import BaseModel

from connectors.browser import BrowserBackends
from connectors.servers import MCPServers
from sandbox.manager import SandboxManager

from ...config import GatewayConfig
from ...engine.harmony import ToolDescription, ToolNamespaceConfig
from ...engine.structural_tag import CallShape
from ...files.service import FileService
from ...metrics import Metrics
from ...protocol import Include, ItemStatus
from ...skills.service import SkillService
from ...vector_stores.service import VectorStoreService
from ..events.citations import Resolve
from ..events.log import Batch
from ..events.output import ResponseOutput
from ..events.tool_call import CallKind, ToolCall
from ..history.dialog import Dialog, InputReader
from ..shapes.items import Event, OutputItem
from ..shapes.request import ResponsesRequest, ToolChoiceForm
from ..shapes.tool_models import RequestTool
from .containers import ResponseContainers

INTERRUPTED = (
    "[This call was interrupted: the gateway process running it stopped while it ran. It may or may not "
    "have taken effect; check before making it again.]"
)


@dataclass
class CallBudget:
    """`max_tool_calls`: how many calls the gateway runs for one response."""

    limit: int | None
    made: int = 0

    def take(self, call: ToolCall) -> bool:
        """Count the call, or refuse it (the model is told) when the limit is reached."""
        if self.limit is not None and self.made >= self.limit:
            call.refuse(f"the limit of {self.limit} tool calls for this response is reached. Answer without tools.")
            return False
        self.made += 1
        return True


class ToolNeeds(Protocol):
    """What a tool may use of the app (a part of gateway/services.py's `Services`)."""

    config: GatewayConfig
    metrics: Metrics
    files: FileService
    skills: SkillService
    vector_stores: VectorStoreService
    mcp: MCPServers
    sandbox: SandboxManager | None  # None: no code_interpreter on this gateway
    browser: BrowserBackends | None  # None: no web_search on this gateway


@dataclass
class ToolContext:
    """What every tool of a response may use."""

    services: ToolNeeds
    request: ResponsesRequest  # as it came: what the model is offered of its tools is below
    tenant: str
    output: ResponseOutput
    budget: CallBudget
    tools: list[RequestTool]  # the request's tools offered to the model (after `allowed_tools`), in order
    tool_choice: str | ToolChoiceForm  # the choice `allowed_tools` leaves

    @property
    def enabled(self) -> bool:
        """`tool_choice: "none"`: tools are declared to no one and no call is taken."""
        return self.tool_choice != "none"

    def includes(self, value: Include) -> bool:
        return self.request.includes(value)

    @cached_property
    def containers(self) -> ResponseContainers:
        """The containers the response's hosted tools share."""
        return ResponseContainers(self.services.files, self.tenant)


@dataclass
class Declarations:
    """How the model is told of the tools (harmony.Preamble): namespaces in the system message, the
    client's functions and namespaces in the developer message."""

    system: list[ToolNamespaceConfig] = field(default_factory=list)
    functions: list[ToolDescription] = field(default_factory=list)
    developer: list[ToolNamespaceConfig] = field(default_factory=list)


Owed = Callable[[Mapping[str, Any], Dialog], "dict[str, Any] | None"]


def owed_output(output_type: str, *named: str, **fixed: str) -> Owed:
    """What a call the client runs is owed while it is open: its output, naming the call (and the call's
    `named` fields, and `fixed` ones)."""

    def owed(item: Mapping[str, Any], dialog: Dialog) -> dict[str, Any] | None:
        if item.get("call_id") not in dialog.open_calls:
            return None
        return {"type": output_type, "call_id": item["call_id"], **{name: item.get(name) for name in named}, **fixed}

    return owed


DeclaredT = TypeVar("DeclaredT", bound=BaseModel)
AnyTool: TypeAlias = "Tool[Any]"  # a tool of any kind, where kinds are mixed


class Tool(Generic[DeclaredT]):
    """One kind of tool, of the request's tools of type `DeclaredT`. The class attributes are what
    registry.py derives the request's rules from."""

    request_types: ClassVar[tuple[type, ...]] = ()  # the request's tool models of this kind
    namespaces: ClassVar[frozenset[str]] = frozenset()  # built-in Harmony namespaces it answers (reserved)
    includes: ClassVar[tuple[Include, ...]] = ()  # the `include` values it honours
    choices: ClassVar[tuple[type, ...]] = ()  # the named `tool_choice` forms it owns
    metric: ClassVar[str] = ""  # its calls' label in gateway_tool_calls_total
    produces: ClassVar[tuple[type[OutputItem], ...]] = ()  # the output items it writes
    reads: ClassVar[Mapping[type[BaseModel], InputReader]] = {}  # the input items it reads back, and how
    # What a response that stopped for the client owes for one of its output items, by the item's type: the
    # stub steering names (steering.py), with only the fields that identify the answer; None: nothing (any more).
    owes: ClassVar[Mapping[str, Owed]] = {}

    def __init__(self, context: ToolContext, declared: list[DeclaredT]) -> None:
        self.context = context
        self.declared = declared  # the request's tools of this kind (after `allowed_tools`), in order
        self.dialog = Dialog()

    @classmethod
    def carried_out(cls, dialog: Dialog) -> str | None:
        """The type of an input item of this tool in `dialog` that only a response carries out (an MCP approval
        runs its call): refused where no response runs, a conversation's items API. None: none there."""
        return None

    def annotations(self, text: str) -> list[Event]:
        """The annotations a finished message of the model's has for this tool's work (links to files its
        container wrote), announced after the message's last delta; the numbered citations of what a tool
        found resolve through `citations()` as the text streams."""
        return []

    @classmethod
    def available(cls, services: ToolNeeds) -> bool:
        """Whether this gateway runs the kind at all; a request's tool of a kind it does not is refused
        by name (or dropped, with `server.drop_unavailable_tools`)."""
        return True

    @staticmethod
    def matches(tool: RequestTool, ref: dict[str, Any]) -> bool:
        """Whether an `allowed_tools` entry names this request tool (one of `request_types`): by its type,
        as OpenAI names a built-in tool there (`{"type": "shell"}`); a kind whose tools have names too says
        how they are named."""
        return ref.get("type") == getattr(tool, "type", None)

    def index(self, tool: BaseModel) -> int:
        """Where a request tool is in the request's `tools` (by identity: two tools may be equal)."""
        return next(index for index, each in enumerate(self.context.request.tools) if each is tool)

    def param(self, tool: BaseModel) -> str:
        return f"tools[{self.index(tool)}]"

    async def prepare(self, dialog: Dialog, provision: bool) -> None:
        """Check the declared tools; without `provision` (a prompt only counted) create nothing."""
        self.dialog = dialog

    def prepared(self, tools: Sequence[AnyTool]) -> None:
        """Every tool of the request is prepared (`tools`, this one among them): what one kind needs to know
        of the others (tool search of MCP's deferred servers, namespaces of the names the others take)."""

    def citations(self) -> Resolve | None:
        """How the answer's citations of this tool's sources resolve, for the messages' annotations (the
        browser's); None: it has none."""
        return None

    def recipients(self) -> Iterable[str]:
        """The namespaces of the model's calls this tool takes, in this request."""
        return ()

    def call_shapes(self) -> Iterable[CallShape]:
        """The calls the model may make to this tool in the engine's grammar (engine/structural_tag.py), and
        what each call's message may hold; by default any name in its namespaces, with any text. A kind whose
        calls have declared names and arguments lists them: the grammar then allows no other."""
        return [CallShape(namespace, any_name=True) for namespace in self.recipients()]

    def check_choice(self, choice: ToolChoiceForm) -> None:
        """A 400 when a named `tool_choice` of this kind (one of `choices`) names a tool the request does
        not have."""

    def forced_header(self, choice: str | ToolChoiceForm) -> str | None:
        """The start of the call the request's `tool_choice` (whatever it is) forces. Harmony has no
        forcing of its own, but the prompt is the gateway's: the assistant's channel and recipient (up to
        `<|message|>` where the tool is named) end the prompt, on every engine turn until the model made a
        call to a declared tool."""
        return None

    def declare(self, declarations: Declarations) -> None:
        """Add the tool's declarations to what the model reads."""

    @property
    def work_before_engine(self) -> bool:
        return False

    async def before_engine(self) -> None:
        """Work the request asks for before the model runs."""

    def open_call(self, call: ToolCall, name: str) -> OutputItem | None:
        """A call to `NAMESPACE.name` of this tool: claim it and return its streaming item (or None), or
        refuse it (`call.refuse`)."""
        call.refuse(f"there is no tool '{call.recipient}'. Use only the tools declared to you.")
        return None

    async def written(self, call: ToolCall, text: str) -> Batch:
        """The call's message is complete: its events (its input done, running); `call.invalidate` when
        it cannot be used as written."""
        return []

    async def run(self, call: ToolCall) -> None:
        """Run a call this tool claimed to run here; leave what the model reads in `call.output`."""

    async def resume(self, call: ToolCall) -> None:
        """A call of this tool was being made when its replica stopped, and the run was adopted here
        (responses/loop/adoption.py). It is never made again (it may have had its effect): the model is told it
        was interrupted. A tool that can tell what became of it, or that only reads, does better."""
        call.output = INTERRUPTED
        if call.item is not None and not call.item.done_sent:
            output = self.context.output
            output.emit(call.item.closed(output.events, ItemStatus.INCOMPLETE))


async def run_call(call: ToolCall, metrics: Metrics, resumed: bool = False) -> None:
    """Run a call its tool runs here (a call refused or found invalid runs nothing), and count it;
    `resumed`: take up one a replica that stopped was making (`Tool.resume`)."""
    started = time.perf_counter()
    if call.kind is CallKind.HOSTED and call.tool is not None:
        await (call.tool.resume(call) if resumed else call.tool.run(call))
    outcome = getattr(call.item, "status", ItemStatus.FAILED)
    metrics.tool_call(call.metric, outcome, time.perf_counter() - started)
