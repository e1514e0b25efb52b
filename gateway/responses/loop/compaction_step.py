"""A compaction, as a step of the loop: the dialog's past replaced by the model's summary of it, streamed
as a `compaction` item. Taken before an engine call whose prompt is past `context_management`'s threshold
(engine_calls.py), or as the whole of a response whose input ends with a `compaction_trigger` (run.py).
What it does to the run is said to each part that holds it: the dialog is rewritten, the run's state
counts the summary's tokens and is marked anew (`compacted`), the prompt is rendered from the start."""

from __future__ import annotations

from ...core.sealed import Purpose
from ...engine.routing import ModelEngine
from ..shapes.request import ResponsesRequest
from ..shapes.response_object import Usage
from .compaction import CompactionOutput, summarize
from .needs import ResponsesNeeds
from .prompt_builder import PromptBuilder
from .run_state import RunState


class CompactionStep:
    def __init__(
        self, services: ResponsesNeeds, engine: ModelEngine, request: ResponsesRequest, tenant: str, state: RunState, prompts: PromptBuilder
    ) -> None:
        self._services = services
        self._engine = engine
        self._effort = request.reasoning.effort if request.reasoning else None
        self._tenant = tenant
        self._state = state
        self._prompts = prompts

    async def run(self) -> None:
        state, services = self._state, self._services
        output, dialog = state.output, state.dialog
        state.unmark()  # no adoption in the middle of one: its replica stopping fails the run
        item = output.add(CompactionOutput)
        output.emit(item.compacting(output.events))
        summary = await summarize(services, self._engine, dialog.messages, self._prompts.affinity_key, self._effort, tenant=self._tenant)
        state.count(Usage(input=summary.input_tokens, output=summary.output_tokens))
        dialog.owner = item.id
        dialog.compact(summary.text)
        output.emit(item.sealed(output.events, services.sealer.seal(summary.text, Purpose.COMPACTION, self._tenant)))
        self._prompts.dialog_rewritten()
        state.compacted()
