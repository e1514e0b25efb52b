"""The Response object, built in one place: as a run starts (`skeleton`) and as it ends (`ended`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from ...core.ids import new_id
from ...protocol import ResponseStatus
from .output_items import OutputItemShape
from .request import ResponsesRequest
from .tool_models import FunctionTool, McpTool


@dataclass
class Usage:
    """The tokens of every engine call of the response, however each ended."""

    input: int = 0
    cached: int = 0
    output: int = 0
    reasoning: int = 0


class UsageObject(TypedDict):
    input_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens: int
    output_tokens_details: dict[str, int]
    total_tokens: int


class ResponseObject(TypedDict):
    """OpenAI's Response object, field for field (`openai/types/responses/response.py`). A typed dict, not
    a model: it is written into the journal and the stream as it is, with no conversion on the way."""

    id: str
    object: Literal["response"]
    created_at: int
    status: ResponseStatus
    background: bool
    completed_at: int | None
    error: dict[str, str] | None
    incomplete_details: dict[str, str] | None
    instructions: str | None
    max_output_tokens: int | None
    max_tool_calls: int | None
    model: str
    output: list[OutputItemShape]
    parallel_tool_calls: bool
    previous_response_id: str | None
    conversation: dict[str, str] | None
    reasoning: dict[str, str | None]
    service_tier: Literal["default", "flex", "priority"]
    store: bool
    temperature: float
    text: dict[str, Any]
    tool_choice: str | dict[str, Any]
    tools: list[dict[str, Any]]
    top_logprobs: int
    top_p: float
    truncation: Literal["auto", "disabled"]
    usage: UsageObject | None
    user: str | None
    metadata: dict[str, str]
    presence_penalty: float
    frequency_penalty: float
    safety_identifier: str | None
    prompt_cache_key: str | None
    prompt_cache_retention: Literal["in_memory", "24h"] | None


def skeleton(request: ResponsesRequest, model_id: str, echoed_tools: list[dict[str, Any]], echoed_choice: str | dict[str, Any]) -> ResponseObject:
    """The response as it starts: every field OpenAI's object has, the output still empty."""
    text_format = request.text.format.model_dump(by_alias=True, exclude_none=True) if request.text and request.text.format else {"type": "text"}
    background = bool(request.background)
    return {
        "id": new_id("resp"),
        "object": "response",
        "created_at": int(time.time()),
        "status": ResponseStatus.QUEUED if background else ResponseStatus.IN_PROGRESS,
        "background": background,
        "completed_at": None,
        "error": None,
        "incomplete_details": None,
        "instructions": request.instructions,
        "max_output_tokens": request.max_output_tokens,
        "max_tool_calls": request.max_tool_calls,
        "model": model_id,
        "output": [],
        "parallel_tool_calls": request.parallel_tool_calls,
        "previous_response_id": request.previous_response_id,
        "conversation": {"id": request.conversation_id} if request.conversation_id is not None else None,
        "reasoning": {
            "effort": request.reasoning.effort if request.reasoning else None,
            "summary": (request.reasoning.summary or request.reasoning.generate_summary) if request.reasoning else None,
        },
        "service_tier": "flex" if request.service_tier == "flex" else "priority" if request.service_tier == "priority" else "default",
        "store": request.store,
        "temperature": request.temperature if request.temperature is not None else 1.0,
        "text": {"format": text_format, "verbosity": (request.text.verbosity if request.text else None) or "medium"},
        "tool_choice": echoed_choice,
        "tools": echoed_tools,
        "top_logprobs": request.top_logprobs or 0,
        "top_p": request.top_p if request.top_p is not None else 1.0,
        "truncation": request.truncation or "disabled",
        "usage": None,
        "user": request.user,
        "metadata": request.metadata or {},
        # Fields OpenAI's Response object always has; the gateway has no penalties on this API.
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "safety_identifier": request.safety_identifier,
        "prompt_cache_key": request.prompt_cache_key,
        "prompt_cache_retention": request.prompt_cache_retention,
    }


def ended(
    response: ResponseObject, status: ResponseStatus, error: dict[str, str] | None, incomplete: dict[str, str] | None, usage: Usage
) -> ResponseObject:
    """The response as it ended (`response` holds its output)."""
    return response | {
        "status": status,
        "error": error,
        "incomplete_details": incomplete,
        "completed_at": int(time.time()) if status == ResponseStatus.COMPLETED else None,
        "usage": {
            "input_tokens": usage.input,
            "input_tokens_details": {"cached_tokens": usage.cached, "cache_write_tokens": 0},
            "output_tokens": usage.output,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning},
            "total_tokens": usage.input + usage.output,
        },
    }


SECRET_SHOWN = "********"


def echo_tool(tool: Any) -> dict[str, Any]:
    """A request's tool as the Response object shows it: MCP credentials and domain secrets left out,
    `strict` spelled out."""
    if isinstance(tool, McpTool):
        return tool.echo()
    echoed: dict[str, Any] = tool.model_dump(exclude_none=True)
    if isinstance(tool, FunctionTool):
        echoed |= {"strict": tool.strict is not False, "description": tool.description, "parameters": tool.parameters}
    for holder in (echoed.get("environment"), echoed.get("container")):  # the hosted shell's, code_interpreter's
        policy = holder.get("network_policy") if isinstance(holder, dict) else None
        for secret in (policy or {}).get("domain_secrets") or []:
            secret["value"] = SECRET_SHOWN  # a domain secret is shown nowhere, the response and its store included
    return echoed
