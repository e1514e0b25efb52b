"""The Open Responses specification's checks (openresponses.org), written here from its published
schema: the Response object, its output items and every streaming event a compliant server sends, as
JSON Schemas checked with jsonschema. Our own text; the spec's schema files are not vendored (its
repository carries no licence file to vendor them under).

Where the spec and OpenAI's API differ, OpenAI's event names are used, because the SDKs parse them.
"""

from __future__ import annotations

from typing import Any

import jsonschema

STRING, INTEGER, NUMBER, BOOLEAN = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
NULL = {"type": "null"}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, NULL]}


def obj(required: dict[str, Any], **optional: Any) -> dict[str, Any]:
    """An object with these required properties (and these optional ones); other properties allowed."""
    return {"type": "object", "required": list(required), "properties": required | optional}


def const(value: str) -> dict[str, Any]:
    return {"const": value}


LOGPROB = obj({"token": STRING, "logprob": NUMBER, "bytes": {"type": "array", "items": INTEGER}, "top_logprobs": {"type": "array"}})
OUTPUT_TEXT = obj({"type": const("output_text"), "text": STRING, "annotations": {"type": "array"}, "logprobs": {"type": "array", "items": LOGPROB}})
STATUS = {"enum": ["in_progress", "completed", "incomplete"]}

MESSAGE = obj(
    {"type": const("message"), "id": STRING, "status": STATUS, "role": const("assistant"), "content": {"type": "array", "items": OUTPUT_TEXT}}
)
FUNCTION_CALL = obj({"type": const("function_call"), "id": STRING, "call_id": STRING, "name": STRING, "arguments": STRING, "status": STATUS})
REASONING = obj(
    {"type": const("reasoning"), "id": STRING, "summary": {"type": "array"}},
    content={"type": "array", "items": obj({"type": const("reasoning_text"), "text": STRING})},
    encrypted_content=nullable(STRING),
)
OUTPUT_ITEM = {
    "type": "object",
    "required": ["type"],
    "oneOf": [
        {"properties": {"type": const("message")}, "allOf": [MESSAGE]},
        {"properties": {"type": const("function_call")}, "allOf": [FUNCTION_CALL]},
        {"properties": {"type": const("reasoning")}, "allOf": [REASONING]},
    ],
}

USAGE = obj(
    {
        "input_tokens": INTEGER,
        "output_tokens": INTEGER,
        "total_tokens": INTEGER,
        "input_tokens_details": obj({"cached_tokens": INTEGER}),
        "output_tokens_details": obj({"reasoning_tokens": INTEGER}),
    }
)
ERROR = obj({"code": STRING, "message": STRING})
TOOL_CHOICE = {"anyOf": [{"enum": ["auto", "none", "required"]}, obj({"type": STRING})]}

RESPONSE = obj(
    {
        "id": STRING,
        "object": const("response"),
        "created_at": INTEGER,
        "completed_at": nullable(INTEGER),
        "status": {"enum": ["queued", "in_progress", "completed", "failed", "incomplete", "cancelled"]},
        "incomplete_details": nullable(obj({"reason": STRING})),
        "model": STRING,
        "previous_response_id": nullable(STRING),
        "instructions": nullable({"anyOf": [STRING, {"type": "array"}]}),
        "output": {"type": "array", "items": OUTPUT_ITEM},
        "error": nullable(ERROR),
        "tools": {"type": "array", "items": obj({"type": STRING})},
        "tool_choice": TOOL_CHOICE,
        "truncation": {"enum": ["auto", "disabled"]},
        "parallel_tool_calls": BOOLEAN,
        "text": obj({"format": obj({"type": STRING})}),
        "top_p": NUMBER,
        "presence_penalty": NUMBER,
        "frequency_penalty": NUMBER,
        "top_logprobs": INTEGER,
        "temperature": NUMBER,
        "reasoning": nullable({"type": "object"}),
        "user": nullable(STRING),
        "usage": nullable(USAGE),
        "max_output_tokens": nullable(INTEGER),
        "max_tool_calls": nullable(INTEGER),
        "store": BOOLEAN,
        "background": BOOLEAN,
        "service_tier": STRING,
        "metadata": {"type": "object", "additionalProperties": STRING},
        "safety_identifier": nullable(STRING),
        "prompt_cache_key": nullable(STRING),
    },
    conversation=nullable(obj({"id": STRING})),
)

_ITEM_EVENT = {"sequence_number": INTEGER, "item_id": STRING, "output_index": INTEGER}
_PART_EVENT = _ITEM_EVENT | {"content_index": INTEGER}


def _event(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    return obj({"type": const(name), "sequence_number": INTEGER} | fields)


# Every streaming event of the spec, by type.
EVENTS: dict[str, dict[str, Any]] = {
    name: _event(name, {"response": RESPONSE})
    for name in ("response.created", "response.queued", "response.in_progress", "response.completed", "response.failed", "response.incomplete")
} | {
    "response.output_item.added": _event("response.output_item.added", {"output_index": INTEGER, "item": OUTPUT_ITEM}),
    "response.output_item.done": _event("response.output_item.done", {"output_index": INTEGER, "item": OUTPUT_ITEM}),
    "response.content_part.added": _event("response.content_part.added", _PART_EVENT | {"part": {"type": "object", "required": ["type"]}}),
    "response.content_part.done": _event("response.content_part.done", _PART_EVENT | {"part": {"type": "object", "required": ["type"]}}),
    "response.output_text.delta": _event(
        "response.output_text.delta", _PART_EVENT | {"delta": STRING, "logprobs": {"type": "array", "items": LOGPROB}}
    ),
    "response.output_text.done": _event("response.output_text.done", _PART_EVENT | {"text": STRING, "logprobs": {"type": "array", "items": LOGPROB}}),
    "response.refusal.delta": _event("response.refusal.delta", _PART_EVENT | {"delta": STRING}),
    "response.refusal.done": _event("response.refusal.done", _PART_EVENT | {"refusal": STRING}),
    "response.function_call_arguments.delta": _event("response.function_call_arguments.delta", _ITEM_EVENT | {"delta": STRING}),
    "response.function_call_arguments.done": _event("response.function_call_arguments.done", _ITEM_EVENT | {"arguments": STRING}),
    "response.reasoning_text.delta": _event("response.reasoning_text.delta", _PART_EVENT | {"delta": STRING}),
    "response.reasoning_text.done": _event("response.reasoning_text.done", _PART_EVENT | {"text": STRING}),
    "response.reasoning_summary_part.added": _event(
        "response.reasoning_summary_part.added", _ITEM_EVENT | {"summary_index": INTEGER, "part": {"type": "object"}}
    ),
    "response.reasoning_summary_part.done": _event(
        "response.reasoning_summary_part.done", _ITEM_EVENT | {"summary_index": INTEGER, "part": {"type": "object"}}
    ),
    "response.reasoning_summary_text.delta": _event(
        "response.reasoning_summary_text.delta", _ITEM_EVENT | {"summary_index": INTEGER, "delta": STRING}
    ),
    "response.reasoning_summary_text.done": _event("response.reasoning_summary_text.done", _ITEM_EVENT | {"summary_index": INTEGER, "text": STRING}),
    "response.output_text.annotation.added": _event(
        "response.output_text.annotation.added", _PART_EVENT | {"annotation_index": INTEGER, "annotation": {"type": "object"}}
    ),
    "error": _event("error", {"error": {"type": "object"}}),
}

_validators = {name: jsonschema.Draft202012Validator(schema) for name, schema in EVENTS.items()}
_response_validator = jsonschema.Draft202012Validator(RESPONSE)


def response_errors(response: Any) -> list[str]:
    """What in a Response object breaks the spec, as `path: message` lines (none when it complies)."""
    return [f"{'.'.join(map(str, error.absolute_path))}: {error.message}" for error in _response_validator.iter_errors(response)]


def event_errors(events: list[dict[str, Any]]) -> list[str]:
    """What in a stream's events breaks the spec: unknown types, missing or mistyped fields."""
    errors = []
    for event in events:
        kind = event.get("type")
        validator = _validators.get(kind) if isinstance(kind, str) else None
        if validator is None:
            errors.append(f"event {kind!r} is not a streaming event of the spec")
            continue
        errors += [f"{kind}: {'.'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(event)]
    return errors
