"""The body of `POST /v1/chat/completions`, and its translation into a Responses request.

Chat Completions runs on the Responses machinery: messages become input items (an assistant turn's
`reasoning` becomes that turn's analysis, its `tool_calls` function calls, tool messages function call
outputs), so the Harmony rendering and the loop are the same code for both APIs.

Its messages are in messages.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator, model_validator

from runtime.numbers import decimal

from ..core.models import StrictModel
from ..errors import bad_request
from ..responses.loop.stops import MAX_STOP_CHARS, MAX_STOPS
from ..responses.shapes.request import ResponsesRequest, refuse_unsupported
from ..responses.shapes.tool_models import FunctionDefinition
from .messages import (
    AssistantMessage,
    ChatMessage,
    CustomToolCall,
    SystemMessage,
    UserMessage,
    text_of,
    user_content,
)


class ChatTool(StrictModel):
    type: Literal["function"]
    function: FunctionDefinition


class CustomTextFormat(StrictModel):
    type: Literal["text"]


class Grammar(StrictModel):
    definition: str = Field(min_length=1, max_length=64 * 1024)
    syntax: Literal["lark", "regex"]


class CustomGrammarFormat(StrictModel):
    type: Literal["grammar"]
    grammar: Grammar


class CustomDefinition(StrictModel):
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    format: Annotated[Union[CustomTextFormat, CustomGrammarFormat], Field(discriminator="type")] | None = None


class ChatCustomTool(StrictModel):
    """A tool whose input is raw text (the Responses API's `custom` tool)."""

    type: Literal["custom"]
    custom: CustomDefinition

    def as_responses_tool(self) -> dict[str, Any]:
        tool: dict[str, Any] = {"type": "custom", "name": self.custom.name, "description": self.custom.description}
        fmt = self.custom.format
        if isinstance(fmt, CustomGrammarFormat):
            tool["format"] = {"type": "grammar", "syntax": fmt.grammar.syntax, "definition": fmt.grammar.definition}
        elif fmt is not None:
            tool["format"] = {"type": "text"}
        return tool


class NamedToolChoice(StrictModel):
    type: Literal["function"]
    function: dict[str, str]


class NamedCustomChoice(StrictModel):
    type: Literal["custom"]
    custom: dict[str, str]


class AllowedToolsSet(StrictModel):
    mode: Literal["auto", "required"]
    tools: list[dict[str, Any]] = Field(min_length=1, max_length=128)


class AllowedToolsChoice(StrictModel):
    type: Literal["allowed_tools"]
    allowed_tools: AllowedToolsSet

    def as_responses_choice(self) -> dict[str, Any]:
        """Chat names a tool as `{"type", "function": {"name"}}`; the Responses API as `{"type", "name"}`."""
        tools = []
        for tool in self.allowed_tools.tools:
            kind = tool.get("type")
            inner = tool.get(kind) if isinstance(kind, str) else None
            tools.append({"type": kind, "name": inner.get("name")} if isinstance(inner, dict) else tool)
        return {"type": "allowed_tools", "mode": self.allowed_tools.mode, "tools": tools}


class ApproximateLocation(StrictModel):
    city: str | None = None
    country: str | None = None
    region: str | None = None
    timezone: str | None = None


class ChatUserLocation(StrictModel):
    type: Literal["approximate"]
    approximate: ApproximateLocation = ApproximateLocation()


class WebSearchOptions(StrictModel):
    """Chat Completions' web search: the browser tool of the Responses API (its `web_search` tool)."""

    search_context_size: Literal["low", "medium", "high"] | None = None
    user_location: ChatUserLocation | None = None


class StreamOptions(StrictModel):
    include_usage: bool = False
    include_obfuscation: bool | None = None  # the gateway never pads its chunks: both values are the same stream


class JSONSchemaFormat(StrictModel):
    name: str = "response"
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    description: str | None = None
    strict: bool | None = None


class ResponseFormat(StrictModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None


MAX_LOGIT_BIAS = 300  # OpenAI's limit
VOCABULARY_SIZE = 201088  # gpt-oss's o200k_harmony

UNSUPPORTED = {
    "functions": "the legacy `functions` field: declare them as `tools`",
    "function_call": "the legacy `function_call` field: use `tool_choice`",
    "audio": "gpt-oss reads and writes no audio",
    "prediction": "predicted outputs are not supported",
    "moderation": "moderation is OpenAI's own",
}


class ChatRequest(StrictModel):
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[Annotated[Union[ChatTool, ChatCustomTool], Field(discriminator="type")]] = []
    tool_choice: (
        Literal["auto", "none", "required"] | Annotated[Union[NamedToolChoice, NamedCustomChoice, AllowedToolsChoice], Field(discriminator="type")]
    ) = "auto"
    parallel_tool_calls: bool = True
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    n: int = Field(1, ge=1, le=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    response_format: ResponseFormat | None = None
    include_reasoning: bool = True
    user: str | None = None
    # Sent to vLLM as they are.
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    logit_bias: dict[str, int] | None = None
    service_tier: Literal["auto", "default", "flex", "priority"] | None = None  # responses/loop/service_tier.py
    # Accepted with no effect here (README: "Compatibility"): vLLM's prefix cache needs no key, nothing is
    # moderated by OpenAI; `verbosity` has no Harmony counterpart.
    safety_identifier: str | None = Field(None, max_length=128)
    prompt_cache_key: str | None = Field(None, max_length=256)
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    modalities: list[Literal["text"]] | None = None  # text is all gpt-oss writes
    store: Literal[False] | None = None  # chat completions are not stored here
    # The answer's tokens with their logprobs (and this many alternatives each), from vLLM.
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    # Accepted as OpenAI accepts it; chat completions are not stored here, so it has no effect.
    metadata: dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]] | None = Field(None, max_length=16)
    functions: Any = None
    function_call: Any = None
    audio: Any = None
    prediction: Any = None
    web_search_options: WebSearchOptions | None = None
    moderation: Any = None
    prompt_cache_options: dict[str, Any] | None = None  # breakpoints and lifetimes of OpenAI's cache: vLLM's needs none
    # Applied by the gateway to the visible text (never the reasoning): see gateway/responses/loop/stops.py.
    stop: str | list[str] | None = None

    @field_validator("stop")
    @classmethod
    def _stop_sequences(cls, value: str | list[str] | None) -> list[str]:
        stops = [value] if isinstance(value, str) else list(value or [])
        if len(stops) > MAX_STOPS:
            raise ValueError(f"at most {MAX_STOPS} stop sequences are allowed")
        if any(not 1 <= len(stop) <= MAX_STOP_CHARS for stop in stops):
            raise ValueError(f"each stop sequence must have 1 to {MAX_STOP_CHARS} characters")
        return stops

    @field_validator("logit_bias")
    @classmethod
    def _logit_bias(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        if value is None:
            return None
        if len(value) > MAX_LOGIT_BIAS:
            raise ValueError(f"at most {MAX_LOGIT_BIAS} tokens may be biased")
        for token, bias in value.items():
            token_id = decimal(token)
            if token_id is None or token_id >= VOCABULARY_SIZE:
                raise ValueError(f"'{token}' is not a token id of the model's vocabulary")
            if not -100 <= bias <= 100:
                raise ValueError("each bias must be between -100 and 100")
        return value

    @model_validator(mode="after")
    def _refuse_what_is_not_implemented(self) -> "ChatRequest":
        refuse_unsupported(self, UNSUPPORTED)
        if self.top_logprobs is not None and not self.logprobs:
            raise bad_request("'top_logprobs' requires 'logprobs' to be true.", param="top_logprobs")
        return self

    @model_validator(mode="after")
    def _schema_present(self) -> "ChatRequest":
        fmt = self.response_format
        if fmt is not None and fmt.type == "json_schema" and (fmt.json_schema is None or fmt.json_schema.schema_ is None):
            raise ValueError("response_format json_schema needs json_schema.schema")
        return self

    def to_responses(self) -> ResponsesRequest:
        """The equivalent Responses request (not stored: Chat Completions keeps no state)."""
        instructions: list[str] = []
        items: list[dict[str, Any]] = []
        call_kinds: dict[str, str] = {}  # call id -> the item type of its output
        for index, message in enumerate(self.messages):
            if isinstance(message, SystemMessage):
                if not items:  # leading system/developer messages are the developer instructions
                    instructions.append(text_of(message.content))
                else:
                    items.append({"role": "developer", "content": text_of(message.content)})
            elif isinstance(message, UserMessage):
                items.append({"role": "user", "content": user_content(message.content)})
            elif isinstance(message, AssistantMessage):
                reasoning = message.reasoning if message.reasoning is not None else message.reasoning_content
                if reasoning:
                    items.append({"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": reasoning}]})
                text = text_of(message.content)
                if text:
                    phase = "commentary" if message.tool_calls else "final_answer"
                    items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}], "phase": phase})
                for call in message.tool_calls or []:
                    if isinstance(call, CustomToolCall):
                        call_kinds[call.id] = "custom_tool_call_output"
                        items.append({"type": "custom_tool_call", "call_id": call.id, "name": call.custom.name, "input": call.custom.input})
                    else:
                        call_kinds[call.id] = "function_call_output"
                        items.append({"type": "function_call", "call_id": call.id, "name": call.function.name, "arguments": call.function.arguments})
            else:
                if message.tool_call_id not in call_kinds:
                    raise bad_request(
                        f"No assistant tool call has the id '{message.tool_call_id}'.",
                        param=f"messages[{index}].tool_call_id",
                    )
                items.append({"type": call_kinds[message.tool_call_id], "call_id": message.tool_call_id, "output": text_of(message.content)})

        body: dict[str, Any] = {
            "model": self.model,  # which engine serves it
            "prompt_cache_key": self.prompt_cache_key,  # the conversation's key for a router (engine.session_header)
            "input": items,
            "instructions": "\n\n".join(instructions) or None,
            "store": False,
            "stream": self.stream,
            # Chat Completions' functions are strict only when they say so (the Responses API's are by default).
            "tools": [
                tool.as_responses_tool()
                if isinstance(tool, ChatCustomTool)
                else {"type": "function", **tool.function.model_dump(exclude_none=True), "strict": bool(tool.function.strict)}
                for tool in self.tools
            ]
            + self._web_search(),
            "tool_choice": self._tool_choice(),
            "parallel_tool_calls": self.parallel_tool_calls,
            "max_output_tokens": self.max_completion_tokens or self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "reasoning": {"effort": self.reasoning_effort} if self.reasoning_effort else None,
            "include": ["message.output_text.logprobs"] if self.logprobs else None,
            "top_logprobs": self.top_logprobs,
            "service_tier": self.service_tier,
        }
        fmt = self.response_format
        if fmt is not None and fmt.type == "json_schema" and fmt.json_schema is not None:
            # Chat's `strict` is off unless asked (Responses' is on): a non-strict schema is held to any JSON object.
            schema = fmt.json_schema
            body["text"] = {"format": {"type": "json_schema", "name": schema.name, "schema": schema.schema_, "strict": schema.strict is True}}
        elif fmt is not None and fmt.type == "json_object":
            body["text"] = {"format": {"type": "json_object"}}
        return ResponsesRequest.model_validate(body, strict=False)

    def _tool_choice(self) -> str | dict[str, Any]:
        choice = self.tool_choice
        if isinstance(choice, str):
            return choice
        if isinstance(choice, AllowedToolsChoice):
            return choice.as_responses_choice()
        if isinstance(choice, NamedCustomChoice):
            return {"type": "custom", "name": choice.custom.get("name", "")}
        return {"type": "function", "name": choice.function.get("name", "")}

    def _web_search(self) -> list[dict[str, Any]]:
        options = self.web_search_options
        if options is None:
            return []
        tool: dict[str, Any] = {"type": "web_search", "search_context_size": options.search_context_size}
        if options.user_location is not None:
            tool["user_location"] = {"type": "approximate", **options.user_location.approximate.model_dump(exclude_none=True)}
        return [tool]
