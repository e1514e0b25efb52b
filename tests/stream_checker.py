"""Conformance checker for Responses API streams: the SDK's event models and the invariants of STREAMING.md.

`check_response_stream(events)` takes the decoded `data` objects of one stream, in order, and raises
AssertionError naming the first violation. Every streaming test runs it.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

_EVENT = TypeAdapter(ResponseStreamEvent)
TERMINAL = {"response.completed": "completed", "response.incomplete": "incomplete", "response.failed": "failed"}

# Which event types may be sent for an item of each type (besides output_item.added/done).
ITEM_EVENTS = {
    "reasoning": {
        "response.content_part.added",
        "response.content_part.done",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
    },
    "message": {
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_text.annotation.added",
    },
    "function_call": {"response.function_call_arguments.delta", "response.function_call_arguments.done"},
    "custom_tool_call": {"response.custom_tool_call_input.delta", "response.custom_tool_call_input.done"},
    "shell_call": {"response.shell_call_command.added", "response.shell_call_command.delta", "response.shell_call_command.done"},
    "shell_call_output": {"response.shell_call_output_content.delta", "response.shell_call_output_content.done"},
    "apply_patch_call": set(),
    "local_shell_call": set(),
    "tool_search_call": set(),  # added and done only
    "tool_search_output": set(),
    "compaction": {"response.compaction.compacting"},
    "code_interpreter_call": {
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
    },
    "mcp_call": {
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
    },
    "mcp_list_tools": {
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_list_tools.failed",
    },
    "mcp_approval_request": set(),  # added and done only
    "web_search_call": {
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
    },
    "file_search_call": {
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
    },
}
# The order of a web_search_call's events (`completed` only when it succeeded).
SEARCH_STEPS = ["response.web_search_call.in_progress", "response.web_search_call.searching", "response.web_search_call.completed"]
FILE_SEARCH_STEPS = [step.replace("web_search", "file_search") for step in SEARCH_STEPS]
MCP_CALL_STEPS = [
    "response.mcp_call.in_progress",
    "response.mcp_call_arguments.delta",
    "response.mcp_call_arguments.done",
    "response.mcp_call.completed|failed",
]
LIST_STEPS = ["response.mcp_list_tools.in_progress", "response.mcp_list_tools.completed|failed"]
# The order of a code_interpreter_call's events (deltas repeat; `completed` only when it ran to the end).
CODE_STEPS = [
    "response.code_interpreter_call.in_progress",
    "response.code_interpreter_call_code.delta",
    "response.code_interpreter_call_code.done",
    "response.code_interpreter_call.interpreting",
    "response.code_interpreter_call.completed",
]
DELTA_OF = {
    "response.reasoning_text.delta": "reasoning_text",
    "response.output_text.delta": "output_text",
}
DONE_OF = {
    "response.reasoning_text.done": "reasoning_text",
    "response.output_text.done": "output_text",
}


class _Item:
    def __init__(self, item: dict[str, Any]) -> None:
        self.added = item
        self.done: dict[str, Any] | None = None
        self.parts: list[dict[str, Any]] = []  # {"type", "open", "text", "done_text"}
        self.summary: list[dict[str, Any]] = []  # a reasoning item's summary parts: {"open", "text", "done_text"}
        self.arguments = ""
        self.arguments_done: str | None = None
        self.steps: list[str] = []  # code_interpreter_call / mcp events, in order
        self.outcome = ""


def check_response_stream(events: list[dict[str, Any]]) -> Response:
    """Validate one stream; return the terminal event's Response."""
    assert events, "empty stream"
    for event in events:
        _EVENT.validate_python(_as_sdk_types_it(event))  # every event must be a valid SDK event

    assert events[0]["type"] == "response.created", f"first event is {events[0]['type']}"
    background = events[0]["response"]["background"]
    opening = ["response.created", "response.queued", "response.in_progress"] if background else ["response.created", "response.in_progress"]
    assert [e["type"] for e in events[: len(opening)]] == opening, f"the stream opens with {[e['type'] for e in events[:3]]}"
    response_id = events[0]["response"]["id"]
    for number, event in enumerate(events):
        assert event["sequence_number"] == number, f"sequence_number {event['sequence_number']} at position {number}"

    terminals = [e for e in events if e["type"] in TERMINAL]
    assert len(terminals) == 1, f"{len(terminals)} terminal events"
    assert events[-1] is terminals[0], "the terminal event is not last"

    items: list[_Item] = []
    for event in events:
        kind = event["type"]
        if kind.startswith("response.") and "response" in event:
            snapshot = event["response"]
            assert snapshot["id"] == response_id, "response id changed"
            expected = TERMINAL.get(kind, "queued" if background and kind in ("response.created", "response.queued") else "in_progress")
            assert snapshot["status"] == expected, f"{kind} carries status {snapshot['status']}"
            continue
        if kind == "error":
            continue
        index = event["output_index"]
        if kind == "response.output_item.added":
            assert index == len(items), f"output_index {index} added after {len(items)} items"
            assert event["item"].get("id"), "item without id"
            items.append(_Item(event["item"]))
            continue
        assert 0 <= index < len(items), f"{kind} for output_index {index} that was never added"
        item = items[index]
        assert item.done is None, f"{kind} after output_item.done of item {index}"
        if "item_id" in event:
            assert event["item_id"] == item.added["id"], f"{kind} names item {event['item_id']}, not {item.added['id']}"
        item_type = item.added["type"]
        if kind == "response.output_item.done":
            done = event["item"]
            for key in ("id", "type", "call_id", "name", "server_label"):
                assert done.get(key) == item.added.get(key), f"{key} changed between added and done"
            assert done.get("status", "completed") in ("completed", "incomplete", "failed"), "done item not terminal"
            assert all(not p["open"] for p in item.parts), "output_item.done with a content part still open"
            item.done = done
            _check_done_item(item)
            continue
        assert kind in ITEM_EVENTS.get(item_type, set()), f"{kind} on a {item_type} item"
        if kind == "response.content_part.added":
            assert event["content_index"] == len(item.parts), f"content_index {event['content_index']} not next"
            assert event["part"]["text"] == "", "a part must open empty"
            item.parts.append({"type": event["part"]["type"], "open": True, "text": "", "done_text": None, "annotations": []})
        elif kind == "response.content_part.done":
            part = _open_part(item, event)
            assert event["part"]["type"] == part["type"], "content_part.done changes the part type"
            assert part["done_text"] is not None, "content_part.done before the text's .done"
            assert event["part"]["text"] == part["text"], "content_part.done text differs from deltas"
            part["open"] = False
        elif kind in DELTA_OF:
            part = _open_part(item, event)
            assert part["type"] == DELTA_OF[kind], f"{kind} inside a {part['type']} part"
            assert part["done_text"] is None, f"{kind} after the text's .done"
            part["text"] += event["delta"]
        elif kind in DONE_OF:
            part = _open_part(item, event)
            assert part["type"] == DONE_OF[kind]
            assert event["text"] == part["text"], f"{kind} text differs from the joined deltas"
            part["done_text"] = event["text"]
        elif kind.startswith("response.reasoning_summary_"):
            _summary_event(item, event)
        elif kind == "response.output_text.annotation.added":
            part = _open_part(item, event)
            assert part["done_text"] is None, "an annotation after the text's .done"
            assert event["annotation_index"] == len(part["annotations"]), "annotation_index not next"
            annotation = event["annotation"]
            if annotation["type"] == "url_citation":
                # Announced once the text it spans has arrived.
                assert 0 <= annotation["start_index"] < annotation["end_index"] <= len(part["text"]), "annotation beyond the text"
            part["annotations"].append(annotation)
        elif kind in SEARCH_STEPS or kind in FILE_SEARCH_STEPS:
            steps = SEARCH_STEPS if kind in SEARCH_STEPS else FILE_SEARCH_STEPS
            step = steps.index(kind)
            assert step == len(item.steps) and item.steps == steps[:step], f"{kind} after {item.steps}"
            item.steps.append(kind)
        elif kind == "response.function_call_arguments.delta":
            assert item.arguments_done is None
            item.arguments += event["delta"]
        elif kind in CODE_STEPS:
            step = CODE_STEPS.index(kind)
            last = CODE_STEPS.index(item.steps[-1]) if item.steps else -1
            assert step > last or (step == last == 1), f"{kind} after {item.steps[-1] if item.steps else 'added'}"
            assert item.steps or step == 0, f"{kind} before code_interpreter_call.in_progress"
            item.steps.append(kind)
            if kind == "response.code_interpreter_call_code.delta":
                item.arguments += event["delta"]
            elif kind == "response.code_interpreter_call_code.done":
                assert event["code"] == item.arguments, "code.done differs from the joined deltas"
                item.arguments_done = event["code"]
        elif kind.startswith("response.mcp_call") or kind.startswith("response.mcp_list_tools"):
            steps = MCP_CALL_STEPS if kind.startswith("response.mcp_call") else LIST_STEPS
            name = kind if kind in steps else kind.rsplit(".", 1)[0] + ".completed|failed"
            step = steps.index(name)
            last = steps.index(item.steps[-1]) if item.steps else -1
            assert step > last or step == last == 1, f"{kind} after {item.steps[-1] if item.steps else 'added'}"
            assert item.steps or step == 0, f"{kind} before its in_progress event"
            item.steps.append(name)
            item.outcome = kind
            if kind == "response.mcp_call_arguments.delta":
                item.arguments += event["delta"]
            elif kind == "response.mcp_call_arguments.done":
                assert event["arguments"] == item.arguments, "mcp_call_arguments.done differs from the joined deltas"
                item.arguments_done = event["arguments"]
        elif kind == "response.function_call_arguments.done":
            assert event["arguments"] == item.arguments, "arguments.done differs from the joined deltas"
            item.arguments_done = event["arguments"]

    for number, item in enumerate(items):
        assert item.done is not None, f"item {number} ({item.added['type']}) never done before the terminal event"

    terminal = terminals[0]
    final = terminal["response"]
    assert [o["id"] for o in final["output"]] == [i.done["id"] for i in items], "response.output differs from done items"
    assert final["output"] == [i.done for i in items], "response.output items differ from the done items"
    status = final["status"]
    if status == "failed":
        assert final["error"], "failed response without error"
    if status == "incomplete":
        assert final["incomplete_details"] and final["incomplete_details"]["reason"], "incomplete without reason"
    if status == "completed":
        # Text items of a completed response are complete; a function call the model wrote with invalid
        # JSON is the one item that stays incomplete (it is not handed to the client; the model retries).
        for item in items:
            if item.done["type"] not in ("function_call", "code_interpreter_call", "mcp_call", "web_search_call", "file_search_call", "shell_call"):
                assert item.done.get("status", "completed") == "completed", "incomplete item in a completed response"
    usage = final["usage"]
    if usage is not None:
        for key in ("input_tokens", "output_tokens", "total_tokens"):
            assert isinstance(usage[key], int)
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        assert "cached_tokens" in usage["input_tokens_details"]
        assert "reasoning_tokens" in usage["output_tokens_details"]
    return Response.model_validate(final)


def _as_sdk_types_it(event: dict[str, Any]) -> dict[str, Any]:
    """OpenAI adds a web_search_call with its status only (openai-streams/openai-web-search-tool.1), while
    the SDK's type requires an action; the SDK builds events without validating them, so it reads OpenAI's
    stream, and the gateway's, which follows it. Validated here with a placeholder action."""
    item = event.get("item")
    if event["type"] == "response.output_item.added" and item and item["type"] == "web_search_call" and "action" not in item:
        return event | {"item": item | {"action": {"type": "search"}}}
    return event


def _open_part(item: _Item, event: dict[str, Any]) -> dict[str, Any]:
    index = event["content_index"]
    assert 0 <= index < len(item.parts), f"content_index {index} of a part never added"
    part = item.parts[index]
    assert part["open"], f"{event['type']} on a closed part"
    return part


def _summary_event(item: _Item, event: dict[str, Any]) -> None:
    """A reasoning item's summary: parts opened in order (`summary_index`), each text's deltas joined equal
    its `.done` and the part's `.done`; all of them after the reasoning's own text part closed."""
    kind, index = event["type"], event["summary_index"]
    assert all(not part["open"] for part in item.parts), f"{kind} while the reasoning's text part is open"
    if kind == "response.reasoning_summary_part.added":
        assert index == len(item.summary) and event["part"] == {"type": "summary_text", "text": ""}, "summary part not next, or not empty"
        item.summary.append({"open": True, "text": "", "done_text": None})
        return
    assert 0 <= index < len(item.summary) and item.summary[index]["open"], f"{kind} on a summary part not open"
    part = item.summary[index]
    if kind == "response.reasoning_summary_text.delta":
        assert part["done_text"] is None, "a summary delta after its .done"
        part["text"] += event["delta"]
    elif kind == "response.reasoning_summary_text.done":
        assert event["text"] == part["text"], "reasoning_summary_text.done differs from the joined deltas"
        part["done_text"] = event["text"]
    else:
        assert part["done_text"] is not None and event["part"] == {"type": "summary_text", "text": part["text"]}, "summary part done differs"
        part["open"] = False


def _check_done_item(item: _Item) -> None:
    done = item.done
    assert done is not None
    if done["type"] == "reasoning":
        assert all(not part["open"] for part in item.summary), "output_item.done with a summary part open"
        assert done["summary"] == [{"type": "summary_text", "text": part["text"]} for part in item.summary], "summary differs from the streamed one"
    if done["type"] in ("reasoning", "message"):
        texts = [p["text"] for p in done["content"]]
        assert texts == [p["text"] for p in item.parts], "done item content differs from the streamed parts"
    if done["type"] == "message":
        announced = [p["annotations"] for p in item.parts]
        assert [p["annotations"] for p in done["content"]] == announced, "done item annotations differ from those announced"
    if done["type"] == "web_search_call":
        assert set(item.added) == {"id", "type", "status"} and item.added["status"] == "in_progress", "added web_search_call"
        completed = "response.web_search_call.completed" in item.steps
        assert completed == (done["status"] == "completed"), f"status {done['status']} after {item.steps}"
        assert done["action"]["type"] in ("search", "open_page", "find_in_page"), "web_search_call without an action"
    if done["type"] == "file_search_call":
        assert item.added["status"] == "in_progress" and item.added["queries"] == [], "added file_search_call"
        completed = "response.file_search_call.completed" in item.steps
        assert completed == (done["status"] == "completed"), f"status {done['status']} after {item.steps}"
        assert completed <= bool(done["queries"]), "a completed file_search_call without its queries"
    if done["type"] == "function_call":
        assert done["arguments"] == item.arguments == item.arguments_done, "function_call arguments differ"
        if done["status"] == "completed":
            json.loads(done["arguments"])  # invariant 9: arguments are valid JSON
    if done["type"] == "mcp_approval_request":
        assert done == item.added, "an approval request's done item differs from its added item"
        json.loads(done["arguments"])  # invariant 9
    if done["type"] == "mcp_list_tools":
        assert item.added["tools"] == [], "mcp_list_tools added with tools"
        failed = item.outcome == "response.mcp_list_tools.failed"
        assert item.steps == LIST_STEPS, f"mcp_list_tools events: {item.steps}"
        assert failed == bool(done.get("error")), "a failed listing carries error, a completed one does not"
    if done["type"] == "mcp_call":
        assert item.added["arguments"] == "" and item.added["status"] == "in_progress"
        assert done["arguments"] == item.arguments == item.arguments_done, "mcp_call arguments differ"
        if done["status"] == "completed":
            assert item.outcome == "response.mcp_call.completed" and done["error"] is None
            assert isinstance(done["output"], str)
            json.loads(done["arguments"])  # invariant 9
        elif done["status"] == "failed":
            assert item.outcome == "response.mcp_call.failed" and done["error"], "failed mcp_call without error"
    if done["type"] == "code_interpreter_call":
        assert done["code"] == item.arguments == item.arguments_done, "code differs from the streamed code"
        assert done["container_id"] == item.added["container_id"], "container_id changed"
        shown = item.added["outputs"] is not None  # outputs are null unless the request included them
        assert item.added["code"] == "" and item.added["outputs"] in ([], None), "added item is not empty"
        assert (done["outputs"] is not None) == shown, "outputs shown in one of added and done only"
        ran = "response.code_interpreter_call.interpreting" in item.steps
        completed = "response.code_interpreter_call.completed" in item.steps
        assert completed == (done["status"] == "completed"), f"status {done['status']} after {item.steps[-1]}"
        if shown and (done["status"] == "completed" or (ran and done["status"] == "failed")):
            assert done["outputs"] and done["outputs"][0]["type"] == "logs", "a call that ran has no logs"


def parse_sse(raw: bytes) -> list[dict[str, Any]]:
    """Decode a Responses SSE body, checking that each frame's `event:` equals its data's type."""
    events = []
    for frame in raw.decode().split("\n\n"):
        lines = [line for line in frame.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        names = [line[7:] for line in lines if line.startswith("event: ")]
        data = "".join(line[6:] for line in lines if line.startswith("data: "))
        event = json.loads(data)
        assert names == [event["type"]], f"event name {names} != data.type {event['type']}"
        events.append(event)
    return events


def sse_as_it_arrives(body: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """A Responses SSE body's events, each as soon as its frame is whole (for a test that acts mid-stream)."""
    buffer = b""
    for data in body:
        buffer += data
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            yield from parse_sse(frame + b"\n\n")
