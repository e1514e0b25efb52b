"""The tools of one response, behind one interface (base.py), one instance per kind (registry.py).

`Toolset` is what the run loop talks to: it hands each request tool to its kind, routes each call the
model makes to the tool that answers its namespace, and asks every tool in turn where the loop needs
all of them (declarations, `tool_choice`, work before the first engine call).
"""

from __future__ import annotations

from typing import Any, TypeVar

from ...engine.structural_tag import CallShape
from ..events.citations import Cited, Resolve
from ..events.log import Batch
from ..events.tool_call import ToolCall
from ..history.dialog import Dialog
from ..shapes.items import Event, OutputItem
from .base import AnyTool, CallBudget, Declarations, Tool, ToolContext, run_call
from .registry import TOOLS, choice_owner, kind_of

__all__ = ["CallBudget", "Declarations", "Tool", "ToolContext", "Toolset"]

ToolT = TypeVar("ToolT", bound=AnyTool)
FUNCTIONS = "functions"  # the client's functions' namespace


def _each_of(resolvers: list[Resolve]) -> Resolve | None:
    """One resolver asking each tool's in turn (their citations differ in shape: a page's lines, a file's name)."""
    if len(resolvers) < 2:
        return resolvers[0] if resolvers else None

    def resolve(number: int, locator: str) -> Cited | None:
        return next((cited for each in resolvers if (cited := each(number, locator)) is not None), None)

    return resolve


class Toolset:
    def __init__(self, context: ToolContext) -> None:
        self.context = context
        tools = context.tools
        self.tools: list[AnyTool] = [kind(context, [tool for tool in tools if kind_of(tool) is kind]) for kind in TOOLS]
        self._by_namespace: dict[str, AnyTool] = {}
        self.citations: Resolve | None = None  # how the answer's citations resolve (the browser's, file search's), once prepared

    def _one(self, kind: type[ToolT]) -> ToolT:
        return next(tool for tool in self.tools if isinstance(tool, kind))

    # -- before the first event ----------------------------------------------------------------------------

    async def prepare(self, dialog: Dialog, provision: bool = True) -> None:
        """Check the request's tools and make ready what their calls need (errors are HTTP errors).
        Without `provision` (a prompt only counted) nothing is created: no container, no copied file."""
        for tool in self.tools:
            await tool.prepare(dialog, provision)
        for tool in self.tools:
            tool.prepared(self.tools)
        self.citations = _each_of([resolve for tool in self.tools if (resolve := tool.citations()) is not None])
        self._by_namespace = {name: tool for tool in self.tools for name in tool.recipients()}
        choice = self.context.tool_choice
        owner = choice_owner(choice)
        if owner is not None and not isinstance(choice, str):
            self._one(owner).check_choice(choice)

    def annotations(self, text: str) -> list[Event]:
        """A finished message's annotations of the tools' work, each once (tools sharing a container find
        the same)."""
        found: dict[tuple[Any, ...], Event] = {}
        for tool in self.tools:
            for annotation in tool.annotations(text):
                found.setdefault((annotation.get("start_index"), annotation.get("end_index"), annotation.get("type")), annotation)
        return list(found.values())

    def call_shapes(self) -> list[CallShape]:
        """Every call the model may make now, for the engine's grammar (loop/constraint.py)."""
        return [shape for tool in self.tools for shape in tool.call_shapes()]

    def declarations(self) -> Declarations:
        declarations = Declarations()
        for tool in self.tools:
            tool.declare(declarations)
        return declarations

    def forced_header(self) -> str | None:
        """The start of the call `tool_choice` forces, or None when the model chooses freely."""
        choice = self.context.tool_choice
        return next((header for tool in self.tools if (header := tool.forced_header(choice)) is not None), None)

    # -- before the first engine call ----------------------------------------------------------------------

    @property
    def work_before_engine(self) -> bool:
        return any(tool.work_before_engine for tool in self.tools)

    async def before_engine(self) -> None:
        for tool in self.tools:
            await tool.before_engine()

    # -- the model's calls ----------------------------------------------------------------------------------

    def open_call(self, call: ToolCall) -> OutputItem | None:
        """Hand a call to the tool that answers its namespace, as its header arrives; its item, if one streams."""
        namespace, _, name = call.recipient.partition(".")
        tool = self._by_namespace.get(namespace)
        functions = self._by_namespace.get(FUNCTIONS)
        if tool is None and not name and functions is not None:
            # `to=get_weather`: a client function named without its namespace, as gpt-oss sometimes writes it.
            meant = f"{FUNCTIONS}.{namespace}"
            if any(shape.recipient == meant for shape in functions.call_shapes()):
                call.recipient, tool, name = meant, functions, namespace
        if tool is None:
            call.refuse(f"there is no tool '{call.recipient}'. Use only the tools declared to you.")
            return None
        return tool.open_call(call, name)

    async def written(self, call: ToolCall, text: str) -> Batch:
        """The call's message is complete (the engine stopped at `<|call|>`)."""
        return await call.tool.written(call, text) if call.tool is not None else []

    async def run(self, call: ToolCall, resumed: bool = False) -> None:
        """Run a call the loop goes on after (one its tool runs here, or one refused), and count it;
        `resumed`: one a replica that stopped was making (adoption), taken up here."""
        await run_call(call, self.context.services.metrics, resumed)
