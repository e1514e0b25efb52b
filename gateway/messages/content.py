"""A run's output as Anthropic's content blocks, and the whole `Message` of a non-streamed answer.

Each output item of the Responses machinery is one or two blocks: reasoning a `thinking` block (its
`signature` the analysis sealed for this tenant), a message a `text` block (its citations as
`web_search_result_location`), a function call a `tool_use` block (its id the call id, stable across turns),
and a hosted tool's call a `server_tool_use` block followed by its `*_tool_result` block. Blocks are read
from the items' own dicts (their `as_dict()`), so this door knows no tool's classes.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..protocol import ItemStatus, ResponseStatus
from ..responses.run_service import LiveResponse

Block = dict[str, Any]


def message_id(run: LiveResponse) -> str:
    return "msg_" + run.id.removeprefix("resp_")


def server_tool_id(item_id: str) -> str:
    return "srvtoolu_" + item_id.split("_", 1)[-1]


def thinking_block(item: dict[str, Any], shown: bool) -> Block:
    text = "".join(part.get("text", "") for part in item.get("content") or ()) if shown else ""
    return {"type": "thinking", "thinking": text, "signature": item.get("encrypted_content") or ""}


def text_block(item: dict[str, Any]) -> Block:
    parts = item.get("content") or ()
    block: Block = {"type": "text", "text": "".join(part.get("text", "") for part in parts)}
    citations = [citation(annotation, block["text"]) for part in parts for annotation in part.get("annotations") or ()]
    if citations:
        block["citations"] = citations
    return block


def citation(annotation: dict[str, Any], text: str) -> Block:
    """A url citation as Anthropic cites a web search result: the cited text is the span it annotates."""
    start, end = annotation.get("start_index", 0), annotation.get("end_index", 0)
    return {
        "type": "web_search_result_location",
        "url": annotation.get("url", ""),
        "title": annotation.get("title"),
        "cited_text": text[start:end],
        "encrypted_index": "",
    }


def tool_use_block(item: dict[str, Any]) -> Block:
    return {"type": "tool_use", "id": item["call_id"], "name": item["name"], "input": parsed_input(item.get("arguments") or "")}


def parsed_input(arguments: str) -> Any:
    """A call's arguments as the object `tool_use.input` is; what does not parse is kept as Claude Code
    keeps it (`__unparsedToolInput`), so the client can tell the model so."""
    try:
        value = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        return {"__unparsedToolInput": arguments}
    return value if isinstance(value, dict) else {"__unparsedToolInput": arguments}


def server_blocks(item: dict[str, Any]) -> list[Block]:
    """A hosted tool's call as its `server_tool_use` block and its result block (none for other items)."""
    kind, use_id = item.get("type"), server_tool_id(item["id"])
    if kind == "web_search_call":
        action = item.get("action") or {}
        if action.get("type") == "search":
            use = {"type": "server_tool_use", "id": use_id, "name": "web_search", "input": {"query": action.get("query", "")}}
            results = [{"type": "web_search_result", "url": source["url"], "title": source.get("title", source["url"]), "encrypted_content": "", "page_age": None}
                       for source in action.get("sources") or ()]  # fmt: skip
            return [use, {"type": "web_search_tool_result", "tool_use_id": use_id, "content": results}]
        url = action.get("url") or ""
        use = {"type": "server_tool_use", "id": use_id, "name": "web_fetch", "input": {"url": url}}
        fetched = {
            "type": "web_fetch_result",
            "url": url,
            "content": {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": ""}},
        }
        return [use, {"type": "web_fetch_tool_result", "tool_use_id": use_id, "content": fetched}]
    if kind == "code_interpreter_call":
        use = {"type": "server_tool_use", "id": use_id, "name": "code_execution", "input": {"code": item.get("code") or ""}}
        logs = "".join(output.get("logs", "") for output in item.get("outputs") or () if output.get("type") == "logs")
        failed = item.get("status") == ItemStatus.FAILED
        result = {
            "type": "code_execution_result",
            "stdout": "" if failed else logs,
            "stderr": logs if failed else "",
            "return_code": int(failed),
            "content": [],
        }
        return [use, {"type": "code_execution_tool_result", "tool_use_id": use_id, "content": result}]
    if kind == "mcp_call":
        use = {
            "type": "mcp_tool_use",
            "id": use_id,
            "name": item["name"],
            "server_name": item["server_label"],
            "input": parsed_input(item.get("arguments") or ""),
        }
        text = item.get("error") or item.get("output") or ""
        return [
            use,
            {"type": "mcp_tool_result", "tool_use_id": use_id, "is_error": bool(item.get("error")), "content": [{"type": "text", "text": text}]},
        ]
    return []


def blocks_of(item: dict[str, Any], thinking_shown: bool) -> list[Block]:
    kind = item.get("type")
    if kind == "reasoning":
        return [thinking_block(item, thinking_shown)]
    if kind == "message":
        return [text_block(item)]
    if kind == "function_call":
        return [tool_use_block(item)] if item.get("status") == ItemStatus.COMPLETED else []
    return server_blocks(item)


def stop_reason(run: LiveResponse, max_tokens: int) -> str:
    response = run.response
    if response["status"] == ResponseStatus.INCOMPLETE:
        reason = (response["incomplete_details"] or {}).get("reason")
        if reason == "max_output_tokens":  # cut by the context's end, not the budget: the window is full
            return "max_tokens" if run.usage.output >= max_tokens else "model_context_window_exceeded"
        return "pause_turn"  # a loop cut at its bound (max_turns), or steered: the client sends it back to go on
    if any(item.get("type") == "function_call" and item.get("status") == ItemStatus.COMPLETED for item in response["output"]):
        return "tool_use"
    return "stop_sequence" if run.stop_sequence is not None else "end_turn"


def start_usage(run: LiveResponse) -> dict[str, Any]:
    """Usage as `message_start` tells it: the prompt, whose cached part the engine tells only once its call
    ends (the non-streamed Message has the split)."""
    usage = run.usage
    if usage.input:
        return usage_object(usage.input - usage.cached, usage.cached, 1)
    return usage_object(run.prompt_tokens, 0, 1)


def usage_object(input_tokens: int, cached: int, output: int) -> dict[str, Any]:
    return {"input_tokens": input_tokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached, "output_tokens": output}


def server_tool_counts(items: list[dict[str, Any]]) -> dict[str, int] | None:
    searches = sum(1 for item in items if item.get("type") == "web_search_call")
    return {"web_search_requests": searches, "web_fetch_requests": 0} if searches else None


def whole_message(run: LiveResponse, model: str, max_tokens: int, thinking_shown: bool, edits: dict[str, Any] | None = None) -> dict[str, Any]:
    output = run.response["output"]
    usage = run.usage
    counted = usage_object(usage.input - usage.cached, usage.cached, usage.output)
    items: list[dict[str, Any]] = [dict(item) for item in output]
    if (servers := server_tool_counts(items)) is not None:
        counted["server_tool_use"] = servers
    return {
        "id": message_id(run),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block for item in items for block in blocks_of(item, thinking_shown)],
        "stop_reason": stop_reason(run, max_tokens),
        "stop_sequence": run.stop_sequence,
        "usage": counted,
        "context_management": edits,
    }
