"""The output writer alone (responses/events/output.py): the one owner of a response's items, sequence
numbers and event log, and what it does for a run adopted from another replica."""

from __future__ import annotations

from gateway.engine.completion import FinishReason
from gateway.protocol import EventType
from gateway.responses.events.output import ResponseOutput


def _types(output: ResponseOutput) -> list[str]:
    return [event["type"] for batch in output.log.batches for event in batch if isinstance(event, dict)]


def test_an_adopted_runs_replayed_events_reach_its_log_only_after_it_unmutes() -> None:
    """The events of tokens parsed again were sent by the replica that died: none of them is appended to
    the log (a reader's filter or the store's duplicate-dropping insert must not be what hides them), and
    what comes after the replay is numbered on from where the dead replica stopped."""
    output = ResponseOutput()
    stored = [{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": []}]
    output.restore(stored, resume_at=40)
    assert output.muted and [item.as_dict() for item in output.items] == stored
    replayed = output.events.make(EventType.OUTPUT_TEXT_DELTA, delta="again")
    output.emit([replayed])
    output.emit_tokens([output.events.make(EventType.OUTPUT_TEXT_DELTA, delta="again")], [1, 2], None)
    shown: list[str] = []
    output.when_unmuted(lambda: shown.append("summary"))
    assert output.log.batches == [] and shown == []
    assert output.generated == [1, 2]  # the tokens are noted all the same: the next break resumes after them

    output.unmute()
    assert shown == ["summary"] and not output.muted
    output.emit_tokens([output.events.make(EventType.OUTPUT_TEXT_DELTA, delta="new")], [3], FinishReason.STOP)
    new = output.log.batches[-1][0]
    assert isinstance(new, dict) and new["sequence_number"] == 40 and new["delta"] == "new"
    assert _types(output) == [EventType.OUTPUT_TEXT_DELTA] and output.finish_reason is FinishReason.STOP
    output.when_unmuted(lambda: shown.append("now"))
    assert shown == ["summary", "now"]  # unmuted: at once


def test_a_run_never_muted_emits_at_once() -> None:
    output = ResponseOutput()
    output.emit([output.events.make(EventType.CREATED)])
    output.emit([])  # an empty step adds no batch: readers are not woken for nothing
    assert _types(output) == [EventType.CREATED] and len(output.log.batches) == 1
    output.unmute()  # not muted: the numbering is left alone
    assert output.events.sequence_number == 1
