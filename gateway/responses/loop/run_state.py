"""What a run carries from one engine call to the next, and from one replica to another: its one owner.

A run's resumable state is the dialog (with what the request planned around it), the tokens used, the
engine calls made, whether a declared tool was called (a forced `tool_choice` is then satisfied), where
the last compaction left the dialog, the auto container its tools use and how far its output got.
`RunState` holds all of it, and is changed through its verbs alone (`begin_call`, `tool_ran`, `count`,
`compacted`); as each engine call begins it takes its own picture (`mark_turn`), which a background run
writes with its events as its checkpoint (journal.py), and from which a replica that adopts the run puts
it back (`restore`; adoption.py goes on from there).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from ...engine.completion import FinishReason
from ...jsontext import dumps
from ..events.output import ResponseOutput
from ..history.dialog import Dialog
from ..shapes.response_object import Usage
from ..tools.containers import ResponseContainers
from .dialog_plan import DialogPlan

WHOLE = -1  # `base` of a dialog written whole (after a compaction rewrote its past)


@dataclass
class TurnStart:
    """The run as an engine call begins: what another replica puts back before parsing the call's tokens."""

    base: int  # where `messages` start in the dialog the request plans (WHOLE: they are all of it)
    messages: list[dict[str, Any]]
    owners: list[str | None]  # the item each of `messages` belongs to (a conversation stores them by item)
    open_calls: dict[str, str]
    state: dict[str, Any]
    items: int  # the output items ended before the call
    usage: dict[str, int]
    turns: int  # engine calls made before this one
    tool_called: bool
    compacted_at: int
    container_id: str | None  # the auto container the run's tools use, made or not yet

    def encode(self) -> str:
        return dumps(self.__dict__)


@dataclass
class Checkpoint:
    turn: TurnStart
    generated: list[int] = field(default_factory=list)  # the call's tokens whose events were sent
    finish_reason: FinishReason | None = None  # the engine finished the call
    ended: bool = False  # the call's own events are all out: a tool call it ended with may be running
    enforced: bool = True  # its grammar was enforced: its calls streamed live (ResponseOutput.enforced)
    summaries: dict[int, str] = field(default_factory=dict)  # its reasoning items' summaries whose events are out

    @staticmethod
    def encode(turn: str, output: ResponseOutput) -> str:
        """The checkpoint in JSON, the turn's part encoded once per call (it is written many times)."""
        return (
            f'{{"turn":{turn},"generated":{dumps(output.generated)},"finish_reason":{dumps(output.finish_reason)},'
            f'"ended":{"true" if output.call_ended else "false"},"enforced":{"true" if output.enforced else "false"},'
            f'"summaries":{dumps({str(index): text for index, text in output.summaries.items()})}}}'
        )

    @classmethod
    def decode(cls, text: str) -> Checkpoint:
        data = json.loads(text)
        # A checkpoint written before "enforced" was: its calls streamed live.
        enforced = bool(data.get("enforced", True))
        summaries = {int(index): str(text) for index, text in data.get("summaries", {}).items()}
        turn, generated = TurnStart(**data["turn"]), list(data["generated"])
        return cls(turn, generated, FinishReason.read(data["finish_reason"]), bool(data["ended"]), enforced, summaries)

    def dialog(self, planned: Dialog) -> Dialog:
        """The dialog as the call began, from the one the request plans (which holds what came before the run)."""
        turn = self.turn
        if turn.base != WHOLE and len(planned.messages) != turn.base:
            # A conversation's items changed since the run began (another response added to it).
            raise ValueError("the dialog the request plans is not the one the run began with")
        dialog = Dialog.from_json(turn.messages, turn.open_calls, turn.state)
        dialog.owners = list(turn.owners)
        if turn.base != WHOLE:  # the planned messages, as they are, before the run's own
            dialog.messages[:0], dialog.owners[:0] = planned.messages, planned.owners
        return dialog


class RunState:
    def __init__(self, output: ResponseOutput, containers: ResponseContainers, resumable: bool) -> None:
        self.plan = DialogPlan()
        self.output = output
        self.containers = containers
        self.resumable = resumable  # a background run: another replica may go on with it
        self._usage = Usage()
        self._turns = 0  # engine calls made
        self._tool_called = False  # a declared tool was called: a forced choice is satisfied
        self._compacted_at = -1  # the dialog's length after the last compaction
        self.planned_length = 0  # the planned dialog's messages: those before the run's own
        self._turn_start: str | None = None  # the engine call in progress as it began, encoded

    @property
    def dialog(self) -> Dialog:
        return self.plan.dialog

    @property
    def usage(self) -> Usage:
        """The tokens counted so far (a copy: they are counted through `count` alone)."""
        return replace(self._usage)

    @property
    def turns(self) -> int:
        """The engine calls made."""
        return self._turns

    @property
    def tool_called(self) -> bool:
        return self._tool_called

    @property
    def compaction_is_fresh(self) -> bool:
        """Nothing was added to the dialog since it was last compacted: compacting again would not help."""
        return self._compacted_at == len(self.dialog.messages)

    # -- the verbs -----------------------------------------------------------------------------------------

    def begin_call(self) -> None:
        """An engine call begins (the run's first: its picture is taken first)."""
        if not self.marked:
            self.mark_turn()
        self._turns += 1

    def tool_ran(self) -> None:
        """A declared tool was called and ran here: a forced `tool_choice` is satisfied."""
        self._tool_called = True

    def count(self, usage: Usage) -> None:
        """Tokens an engine call of the run used, however it ended (its turns, summaries, compactions)."""
        mine = self._usage
        mine.input += usage.input
        mine.cached += usage.cached
        mine.output += usage.output
        mine.reasoning += usage.reasoning

    def compacted(self) -> None:
        """The dialog's past was replaced by its summary: nothing of a parent response lines up any more, and
        an adopter goes on from here, making again the engine call the compaction came before."""
        self._compacted_at = len(self.dialog.messages)
        self.forget_parent()
        self.mark_turn(self._turns - 1)

    def planned(self, plan: DialogPlan, adopted: Checkpoint | None) -> None:
        """The dialog the request plans; an adopted run's, as its engine call in progress began."""
        self.plan = plan
        self.planned_length = len(plan.dialog.messages)
        if adopted is not None:
            self.containers.adopted_auto = adopted.turn.container_id  # before the tools open theirs
            plan.dialog = adopted.dialog(plan.dialog)
            if adopted.turn.base == WHOLE:  # compacted: its past was rewritten, as in a compaction here
                self.forget_parent()

    def forget_parent(self) -> None:
        """The dialog's past was rewritten (a compaction): nothing of a parent response lines up any more."""
        plan = self.plan
        plan.parent_id, plan.parent_length, plan.new_messages_from = None, 0, 0
        plan.parent_tokens = []

    @property
    def marked(self) -> bool:
        """The run has passed its first engine call's start: it has a checkpoint to give."""
        return self._turn_start is not None

    def mark_turn(self, turns: int | None = None) -> None:
        """An engine call begins (or will, once a tool's output is in the dialog): what an adopter puts back."""
        self.output.new_call()
        if not self.resumable:
            return
        dialog = self.dialog
        base = WHOLE if self._compacted_at >= 0 else self.planned_length
        start = max(base, 0)
        self._turn_start = TurnStart(
            base, [message.to_dict() for message in dialog.messages[start:]], dialog.owners[start:], dialog.open_calls,
            dialog.state(), len(self.output.items), self._usage.__dict__, self._turns if turns is None else turns,
            self._tool_called, self._compacted_at, self.containers.auto_id,
        ).encode()  # fmt: skip

    def unmark(self) -> None:
        """No adoption from here until the next mark (in a compaction: the run fails if its replica stops)."""
        self._turn_start = None

    def checkpoint(self) -> str | None:
        """Where another replica would go on from, as of the events emitted so far; None where it cannot (in
        the work before the first engine call, in a compaction)."""
        if self._turn_start is None:
            return None
        return Checkpoint.encode(self._turn_start, self.output)

    def restore(self, checkpoint: Checkpoint, output: list[dict[str, Any]], next_sequence_number: int) -> None:
        """Put back what the checkpoint holds, over the run as its request plans it (`planned`): the output
        items ended before the call, the counters, and where the next events are numbered from."""
        turn = checkpoint.turn
        self.output.restore(output[: turn.items], next_sequence_number)
        self.output.summaries = dict(checkpoint.summaries)
        self._usage = Usage(**turn.usage)
        self._turns, self._tool_called, self._compacted_at = turn.turns, turn.tool_called, turn.compacted_at
        self._turn_start = turn.encode()
