"""What the front doors (Responses over HTTP and its WebSocket, Chat Completions, and the doors to come)
do with a response's run: start it, follow it, wait for it, cancel it, find a live one. Each door is a
translation of its own shapes around this one service; none reaches into the run's parts.

`LiveResponse` is the face a door holds: the run's events to follow, its end to wait for, its result,
what the client owes it, and its usage; not its dialog, state, log or tools.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Sequence

from ..errors import APIError
from .events.log import Batch
from .loop.dialog_plan import Remembered
from .loop.needs import ResponsesNeeds
from .loop.prompt_builder import ChatOptions
from .loop.run import ResponseRun
from .shapes.items import OutputItem
from .shapes.request import ResponsesRequest
from .shapes.response_object import ResponseObject, Usage
from .steering import required_input


class LiveResponse:
    """A response running here (or ended here), as a door sees it."""

    def __init__(self, run: ResponseRun) -> None:
        self._run = run

    @property
    def id(self) -> str:
        return self._run.response["id"]

    @property
    def tenant(self) -> str:
        return self._run.tenant

    @property
    def background(self) -> bool:
        return self._run.background

    @property
    def model_id(self) -> str:
        return self._run.model_id

    @property
    def response(self) -> ResponseObject:
        """The Response as the run last wrote it (whole once it ended)."""
        return self._run.response

    def snapshot(self) -> ResponseObject:
        """The Response as it is now, its output so far included."""
        return self._run.snapshot()

    @property
    def ended(self) -> bool:
        """Its last event is in its log."""
        return self._run.log.closed

    @property
    def failure(self) -> APIError | None:
        return self._run.failure

    @property
    def usage(self) -> Usage:
        return self._run.state.usage

    @property
    def items(self) -> Sequence[OutputItem]:
        """Its output items, in order (a door that writes its own shapes reads them: Chat Completions)."""
        return self._run.output.items

    @property
    def stop_sequence(self) -> str | None:
        """The request's stop sequence that ended its answer, if one did."""
        return self._run.stop_sequence

    @property
    def prompt_tokens(self) -> int:
        """The length of the prompt its engine call was last sent (0 before its first)."""
        return len(self._run.prompts.prompt)

    @property
    def logprob_count(self) -> int | None:
        """Alternatives per token where logprobs were asked for; None where they were not."""
        return self._run.logprob_count

    @property
    def in_conversation(self) -> bool:
        return self._run.plan.conversation is not None

    @property
    def first_logged(self) -> int:
        """The sequence number of the first event this process's log holds (an adopted run's later ones)."""
        return self._run.first_logged

    @property
    def taken_over(self) -> bool:
        """Another replica took the run over: its last events are that replica's, in the store."""
        journal = self._run.journal
        return journal is not None and journal.taken_over

    def follow(self) -> AsyncIterator[Batch]:
        """Its events, as a reader here may see them, until its end."""
        return self._run.follow()

    async def wait(self) -> None:
        """Until its end."""
        await self._run.log.wait_closed()

    async def result(self) -> ResponseObject:
        """The ended Response; its failure raised as the door's error."""
        await self.wait()
        if self.failure is not None:
            raise self.failure
        return self.response

    def owed_input(self) -> list[dict[str, Any]]:
        """The tool results and approvals it stopped for the client to give (their identifying fields)."""
        return required_input(self._run.output.as_dicts(), self._run.dialog)

    async def remembered(self) -> Remembered | None:
        """What the next response on the same socket continues from, in memory."""
        return await self._run.ending.remembered()

    def steer(self) -> None:
        """Steering input waits for it: it ends at its next safe boundary, for a successor to go on."""
        self._run.steered = True

    def cancel(self) -> None:
        self._run.cancel()

    def hand_over(self) -> None:
        self._run.hand_over()


class RunService:
    """Starts, finds and counts responses' runs for the front doors."""

    def __init__(self, services: ResponsesNeeds) -> None:
        self._services = services

    async def start(
        self,
        request: ResponsesRequest,
        tenant: str,
        chat: ChatOptions | None = None,
        remembered: Remembered | None = None,
        generate: bool = True,
    ) -> LiveResponse:
        """Plan, provision and start a response's run; until it returns, a failure is the request's (an
        error the door answers with), after, the run's (its terminal event)."""
        run = ResponseRun(self._services, request, tenant, chat, remembered, generate)
        await run.launch()
        return LiveResponse(run)

    def live(self, response_id: str, tenant: str) -> LiveResponse | None:
        """The tenant's background response of this id, if it runs in this process."""
        run = self._services.runs.background.get(response_id)
        return LiveResponse(run) if isinstance(run, ResponseRun) and run.tenant == tenant else None

    async def input_tokens(self, request: ResponsesRequest, tenant: str) -> int:
        """The request's prompt, counted exactly (rendered as its first engine call's would be)."""
        return await ResponseRun(self._services, request, tenant).input_tokens()
