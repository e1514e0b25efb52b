"""A Messages request as a Responses request: the Messages door runs on the same machinery as the other
two (the run service, the Harmony dialog, the loop), so what differs is this translation alone.

- `system` (its billing header line dropped: it changes every conversation, and the prompt's prefix with
  it) is the developer instructions; `system` turns among the messages are developer messages there.
- A user turn's `tool_result` blocks are function call outputs (before the turn's own text); a
  `tool_reference` among them makes the named deferred tool callable from there on, declared at that
  point of the dialog (an `additional_tools` item) and nowhere before.
- An assistant turn given back: `thinking` is the reasoning its `signature` seals (opened for this tenant
  alone, loop/dialog_plan.py), text a message, `tool_use` a function call.
- `thinking` and `output_config.effort` are gpt-oss's reasoning effort; `output_config.format` the answer's
  JSON schema, held by the engine's grammar as `text.format` is.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..errors import APIError, bad_request, from_validation_error
from ..jsontext import dumps
from ..protocol import Include, ItemStatus
from ..responses.loop.prompt_builder import ChatOptions
from ..responses.shapes.request import ResponsesRequest
from .blocks import (
    AssistantMessage,
    DocumentBlock,
    RedactedThinkingBlock,
    SearchResultBlock,
    SystemTurn,
    TextBlock,
    ThinkingBlock,
    ToolReferenceBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from .request import ClientTool, MessagesRequest, ServerTool, ThinkingDisabled, ThinkingEnabled

BILLING_HEADER = "x-anthropic-billing-header:"
# Hosted tools show what they did (their result blocks); each thinking block carries its signature.
INCLUDED = [Include.ENCRYPTED_REASONING.value, Include.CODE_OUTPUTS.value, Include.SEARCH_SOURCES.value]
EFFORTS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}

# Anthropic-defined tools the client runs: their names and input as Anthropic fixes them.
BASH_SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}, "restart": {"type": "boolean"}}}
EDITOR_SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "undo_edit"]},
        "path": {"type": "string"},
        "file_text": {"type": "string"},
        "old_str": {"type": "string"},
        "new_str": {"type": "string"},
        "insert_line": {"type": "integer"},
        "view_range": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["command", "path"],
}
NOT_SERVED = {
    "computer": "gpt-oss sees no screen",
    "browser": "gpt-oss sees no screen",
    "memory": "the memory tool is not served by this gateway",
    "tool_search_tool": "server-side tool search is not served by this gateway: declare the tools with `defer_loading` and answer "
    "the client's own search with `tool_reference` blocks",
}


def to_responses(request: MessagesRequest, model: str | None, session: str | None) -> tuple[ResponsesRequest, ChatOptions]:
    """The Responses request a Messages request runs as, and the stop sequences it applies."""
    tools = Tools(request)
    dialog = Dialog(tools)
    instructions = [text for text in (system_text(request.system),) if text]
    for index, message in enumerate(request.messages):
        if isinstance(message, SystemTurn):
            text = message.text()
            if not dialog.items:
                instructions.append(text)
            elif text:
                dialog.items.append({"role": "developer", "content": text})
        elif isinstance(message, UserMessage):
            dialog.user(message, index)
        else:
            if index == len(request.messages) - 1 and not paused(message):
                raise bad_request("This model does not support assistant message prefill: the conversation must end with a user message.")
            dialog.assistant(message, index)
    body: dict[str, Any] = {
        "model": model,
        "prompt_cache_key": session,  # a router's key for the conversation (engine.session_header)
        "input": dialog.items,
        "instructions": "\n\n".join(instructions) or None,
        "store": False,
        "stream": request.stream,
        "tools": tools.declared,
        "tool_choice": tool_choice(request),
        "parallel_tool_calls": not getattr(request.tool_choice, "disable_parallel_tool_use", False),
        "max_output_tokens": request.max_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "reasoning": {"effort": effort} if (effort := reasoning_effort(request)) else None,
        "include": INCLUDED,
    }
    if request.output_config is not None and request.output_config.format is not None:
        body["text"] = {"format": {"type": "json_schema", "name": "output", "schema": request.output_config.format.schema_, "strict": True}}
    try:
        translated = ResponsesRequest.model_validate(body, strict=False)
    except ValidationError as exc:  # what this door lets through and the run's own models do not (a tool's long name)
        raise from_validation_error(exc, body) from None
    return translated, ChatOptions(tuple(request.stop_sequences or ()))


def paused(message: AssistantMessage) -> bool:
    """The turn given back as it came after `pause_turn`, its server tool's result last: to go on from."""
    return not isinstance(message.content, str) and bool(message.content) and message.content[-1].type.endswith("_tool_result")


def system_text(system: str | list[TextBlock] | None) -> str:
    if system is None:
        return ""
    blocks = [system] if isinstance(system, str) else [block.text for block in system]
    return "\n\n".join(text for text in blocks if text and not text.startswith(BILLING_HEADER))


def reasoning_effort(request: MessagesRequest) -> str | None:
    """gpt-oss's effort: `output_config.effort` where given, else what the thinking budget asks (gpt-oss
    always reasons: disabled is its lowest effort)."""
    if request.output_config is not None and request.output_config.effort is not None:
        return EFFORTS[request.output_config.effort]
    thinking = request.thinking
    if isinstance(thinking, ThinkingEnabled):
        return "low" if thinking.budget_tokens < 4096 else "medium" if thinking.budget_tokens < 16384 else "high"
    if isinstance(thinking, ThinkingDisabled):
        return "low"
    return None


def tool_choice(request: MessagesRequest) -> str | dict[str, Any]:
    choice = request.tool_choice
    if choice is None or choice.type == "auto":
        return "auto"
    if choice.type == "any":
        return "required"
    if choice.type == "none":
        return "none"
    return {"type": "function", "name": choice.name}


class Tools:
    """The request's tools: those declared at the top, the deferred ones waiting for a reference."""

    def __init__(self, request: MessagesRequest) -> None:
        self.declared: list[dict[str, Any]] = []
        self.deferred: dict[str, dict[str, Any]] = {}
        self.loaded: set[str] = set()
        served: set[str] = set()
        for index, tool in enumerate(request.tools):
            if isinstance(tool, ClientTool) and tool.defer_loading:
                self.deferred[tool.name] = tool.declaration()
            elif isinstance(tool, ClientTool):
                self.declared.append(tool.declaration())
            else:
                hosted = self._server_tool(tool, index)
                if hosted is not None and hosted["type"] not in served:
                    served.add(hosted["type"])
                    self.declared.append(hosted)
        for server in request.mcp_servers or ():
            mcp = {"type": "mcp", "server_label": server.name, "server_url": server.url, "require_approval": "never"}
            if server.authorization_token:
                mcp["authorization"] = server.authorization_token
            self.declared.append(mcp)

    def _server_tool(self, tool: ServerTool, index: int) -> dict[str, Any] | None:
        kind = tool.type
        if kind.startswith(("web_search_", "web_fetch_")):  # the browser: search and open pages
            return {"type": "web_search"}
        if kind.startswith("code_execution_"):
            return {"type": "code_interpreter", "container": {"type": "auto"}}
        if kind.startswith("bash_"):
            return {"type": "function", "name": tool.name or "bash", "parameters": BASH_SCHEMA, "strict": False}
        if kind.startswith("text_editor_"):
            name = tool.name or "str_replace_based_edit_tool"
            return {"type": "function", "name": name, "parameters": EDITOR_SCHEMA, "strict": False}
        if kind == "mcp_toolset":  # the tools of an `mcp_servers` entry, declared with it
            return None
        why = next((why for prefix, why in NOT_SERVED.items() if kind.startswith(prefix)), "it is not a tool this gateway serves")
        raise bad_request(f"tools.{index}.type: '{kind}' is not supported: {why}.", param=f"tools[{index}].type")

    def reference(self, name: str) -> dict[str, Any] | None:
        """A `tool_reference` to `name`: its declaration, the first time a deferred tool is named."""
        if name in self.loaded or name not in self.deferred:
            return None
        self.loaded.add(name)
        return self.deferred[name]


class Dialog:
    """The input items the messages make, in order."""

    def __init__(self, tools: Tools) -> None:
        self.tools = tools
        self.items: list[dict[str, Any]] = []
        self.calls: set[str] = set()  # the tool_use ids given back so far
        self.server_uses: dict[str, dict[str, Any]] = {}  # a hosted tool's call given back: its input, by id

    def user(self, message: UserMessage, index: int) -> None:
        if isinstance(message.content, str):
            self.items.append({"role": "user", "content": message.content})
            return
        parts: list[dict[str, Any]] = []
        loaded: list[dict[str, Any]] = []
        for position, block in enumerate(message.content):
            where = f"messages.{index}.content.{position}"
            if isinstance(block, ToolResultBlock):
                if block.tool_use_id not in self.calls:
                    raise bad_request(f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {block.tool_use_id}.")
                output, declared = self._tool_result(block, where)
                self.items.append({"type": "function_call_output", "call_id": block.tool_use_id, "output": output})
                loaded += declared
            elif isinstance(block, TextBlock):
                parts.append({"type": "input_text", "text": block.text})
            elif isinstance(block, (DocumentBlock, SearchResultBlock)):
                parts.append(document_part(block, where))
            else:
                raise refused_block(block.type, where)
        if loaded:
            self.items.append({"type": "additional_tools", "tools": loaded})
        if parts:
            self.items.append({"role": "user", "content": parts})

    def _tool_result(self, block: ToolResultBlock, where: str) -> tuple[str, list[dict[str, Any]]]:
        texts: list[str] = []
        declared: list[dict[str, Any]] = []
        if isinstance(block.content, str):
            texts.append(block.content)
        else:
            for position, part in enumerate(block.content):
                if isinstance(part, ToolReferenceBlock):
                    declaration = self.tools.reference(part.tool_name)
                    if declaration is not None:
                        declared.append(declaration)
                    texts.append(f"Tool {part.tool_name} is loaded: it can be called now.")
                elif isinstance(part, TextBlock):
                    texts.append(part.text)
                elif isinstance(part, (DocumentBlock, SearchResultBlock)):
                    texts.append(document_part(part, f"{where}.content.{position}")["text"])
                else:
                    raise refused_block(part.type, f"{where}.content.{position}")
        text = "\n".join(texts)
        return (f"Error: {text}" if block.is_error else text), declared

    def assistant(self, message: AssistantMessage, index: int) -> None:
        if isinstance(message.content, str):
            self.items.append(_answer(message.content, "final_answer"))
            return
        calls = any(isinstance(block, ToolUseBlock) for block in message.content)
        for position, block in enumerate(message.content):
            if isinstance(block, (ThinkingBlock, RedactedThinkingBlock)):
                sealed = block.signature if isinstance(block, ThinkingBlock) else block.data
                if sealed:  # unsigned thinking is no one's: the model is not given it
                    self.items.append({"type": "reasoning", "summary": [], "encrypted_content": sealed})
            elif isinstance(block, TextBlock):
                if block.text:
                    self.items.append(_answer(block.text, "commentary" if calls else "final_answer"))
            elif isinstance(block, ToolUseBlock):
                self.calls.add(block.id)
                arguments = dumps(block.input if block.input is not None else {})
                self.items.append({"type": "function_call", "call_id": block.id, "name": block.name, "arguments": arguments})
            elif block.type in ("tool_result", "tool_reference", "document", "search_result"):
                raise refused_block(block.type, f"messages.{index}.content.{position}")
            elif (served := self._server_block(block.model_dump())) is not None:
                self.items.append(served)

    def _server_block(self, block: dict[str, Any]) -> dict[str, Any] | None:
        """A hosted tool's call given back (its `server_tool_use` block, then its result block) as the Responses
        item the model reads it from: the code it ran and what it printed, or the search it made. Other server
        blocks (`mcp_tool_*`) are told by the turn's text that follows them."""
        kind = block.get("type")
        if kind == "server_tool_use" and isinstance(block.get("id"), str):
            given = block.get("input")
            self.server_uses[block["id"]] = given if isinstance(given, dict) else {}
            return None
        used = self.server_uses.get(str(block.get("tool_use_id")), {})
        content = block.get("content")
        if kind in ("code_execution_tool_result", "bash_code_execution_tool_result") and isinstance(content, dict):
            printed = "".join(str(content.get(stream) or "") for stream in ("stdout", "stderr"))
            code = str(used.get("code") or used.get("command") or "")
            return {"type": "code_interpreter_call", "code": code, "outputs": [{"type": "logs", "logs": printed}], "status": ItemStatus.COMPLETED}
        if kind == "web_search_tool_result":
            return {"type": "web_search_call", "status": ItemStatus.COMPLETED, "action": {"type": "search", "query": str(used.get("query") or "")}}
        if kind == "web_fetch_tool_result":
            return {"type": "web_search_call", "status": ItemStatus.COMPLETED, "action": {"type": "open_page", "url": str(used.get("url") or "")}}
        return None


def _answer(text: str, phase: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}], "phase": phase}


def document_part(block: DocumentBlock | SearchResultBlock, where: str) -> dict[str, Any]:
    """A document or search result for the model to read: text, or a PDF as an input file."""
    if isinstance(block, SearchResultBlock):
        body = "\n".join(part.text for part in block.content)
        return {"type": "input_text", "text": f"Search result: {block.title} ({block.source})\n{body}"}
    source, title = block.source, block.title
    kind = source.get("type")
    if kind == "text" and isinstance(source.get("data"), str):
        text = source["data"]
    elif kind == "content" and isinstance(source.get("content"), (str, list)):
        content = source["content"]
        text = content if isinstance(content, str) else "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    elif kind == "base64" and source.get("media_type") == "application/pdf" and isinstance(source.get("data"), str):
        return {"type": "input_file", "filename": f"{title or 'document'}.pdf", "file_data": f"data:application/pdf;base64,{source['data']}"}
    else:
        raise bad_request(f"{where}.source: a document's source must be text, content blocks or a base64 PDF here.")
    return {"type": "input_text", "text": f"Document: {title}\n{text}" if title else text}


def refused_block(kind: str, where: str) -> APIError:
    why = "gpt-oss reads no images" if kind == "image" else "this block is not accepted here"
    return bad_request(f"{where}.type: '{kind[:64]}' is not supported: {why}.")
