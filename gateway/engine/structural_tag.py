"""What one engine call may generate, as a structural tag for vLLM's grammar engine (xgrammar's format).

The model writes after the prompt's `<|start|>assistant`: any number of analysis messages and preambles
(commentary without a recipient), each ended by `<|end|><|start|>assistant`, then one ending: a final
answer, or a call to one of the recipients the request offers, in every header shape gpt-oss writes
(`to=` after or before the channel, with or without `<|constrain|>`, `json` or `code`). What a final
answer and a call's message may hold is the request's: a JSON schema, any JSON object, a regex, or text.
No text generated under the tag holds `<|`: a special token's text never reaches an item.

Only the element types vLLM's `structured_outputs.structural_tag` validates are used (`sequence`, `or`,
`const_string`, `grammar`, `json_schema`, `regex`); the tag goes to the engine as JSON text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import orjson

# Text without `<|`: a `<` is never followed by `|` inside it (a run of `<` may end it, before the marker
# that follows). EBNF, xgrammar's dialect.
_TEXT_RULES = 'text ::= ("<"* [^<|] | "|")* "<"*'
_ANALYSIS = '"<|channel|>analysis<|message|>" text "<|end|><|start|>assistant"'
_PREAMBLE = '"<|channel|>commentary<|message|>" text "<|end|><|start|>assistant"'
# What may stand between a call's recipient and its message: the content type, however it is spelled.
_CONTENT_TYPE = '(" "? "<|constrain|>"? ("json" | "code"))? "<|message|>"'
_CHANNEL = '("commentary" | "analysis")'
_NAME = "[A-Za-z0-9_\\-]+"
_CALL_END: dict[str, Any] = {"type": "or", "elements": [{"type": "const_string", "value": "<|call|>"}, {"type": "const_string", "value": ""}]}
_FINAL_END: dict[str, Any] = {"type": "or", "elements": [{"type": "const_string", "value": "<|end|>"}, {"type": "const_string", "value": ""}]}
_FINAL_HEADER = '"<|channel|>final" (" "? "<|constrain|>"? "json")? "<|message|>"'
_RECIPIENT = re.compile(r"to=([^\s<]+)")


@dataclass(frozen=True)
class Content:
    """What a message may hold: text (no `<|`), any JSON object, JSON valid for `schema`, or a regex's match."""

    kind: Literal["text", "json_object", "json_schema", "regex"]
    schema: dict[str, Any] | None = None
    pattern: str | None = None

    def element(self) -> dict[str, Any]:
        if self.kind == "json_schema":
            return {"type": "json_schema", "json_schema": self.schema, "style": "json"}
        if self.kind == "json_object":
            return {"type": "json_schema", "json_schema": {"type": "object"}, "style": "json"}
        if self.kind == "regex":
            return {"type": "regex", "pattern": self.pattern}
        return _grammar("root ::= text\n" + _TEXT_RULES)


TEXT = Content("text")
JSON_OBJECT = Content("json_object")


def json_schema(schema: dict[str, Any]) -> Content:
    return Content("json_schema", schema=schema)


@dataclass(frozen=True)
class CallShape:
    """A recipient the model may call, and what its message may hold. `any_name`: the recipient is a
    namespace, and a call may name anything in it (`namespace.name`; the tool refuses what it lacks)."""

    recipient: str
    arguments: Content = TEXT
    any_name: bool = False


@dataclass(frozen=True)
class TurnGrammar:
    """What one engine call may end with: a final answer (None: it must call) and the calls it may make."""

    final: Content | None
    calls: tuple[CallShape, ...]
    preambles: bool = True

    def tag(self, prefill: str = "") -> str | None:
        """The structural tag, as JSON text, for what the model writes after the prompt; `prefill` is what
        the prompt already wrote of the assistant's message (a forced call's header). None when nothing
        can be said of it (a prefill of another shape)."""
        if prefill:
            format_ = self._after_prefill(prefill)
            if format_ is None:
                return None
        else:
            endings = [_call(shape) for shape in self.calls]
            if self.final is not None:
                endings.append(_sequence(_grammar(f"root ::= {_FINAL_HEADER}"), self.final.element(), _FINAL_END))
            if not endings:
                return None
            notes = f"root ::= ({_ANALYSIS} | {_PREAMBLE})*" if self.preambles else f"root ::= ({_ANALYSIS})*"
            format_ = _sequence(_grammar(f"{notes}\n{_TEXT_RULES}"), _or(endings))
        return orjson.dumps({"type": "structural_tag", "format": format_}).decode()

    def _after_prefill(self, prefill: str) -> dict[str, Any] | None:
        found = _RECIPIENT.search(prefill)
        if found is None:
            return None
        recipient = found.group(1)
        if prefill.endswith("<|message|>"):  # the whole header: the message is left
            shape = self._shape_of(recipient)
            return _sequence((shape.arguments if shape is not None else TEXT).element(), _CALL_END)
        if recipient.endswith(".") and prefill.endswith(recipient):  # a namespace: a name in it, then the rest
            namespace = recipient[:-1]
            rests = [rest for shape in self.calls if (rest := _call_rest(shape, namespace)) is not None]
            return _or(rests) if rests else None
        return None

    def _shape_of(self, recipient: str) -> CallShape | None:
        exact = next((shape for shape in self.calls if shape.recipient == recipient and not shape.any_name), None)
        namespace = recipient.partition(".")[0]
        return exact or next((shape for shape in self.calls if shape.any_name and shape.recipient == namespace), None)


def _call(shape: CallShape) -> dict[str, Any]:
    recipient = _quoted(shape.recipient) + (f' ("." {_NAME})?' if shape.any_name else "")
    header = f'root ::= ("<|channel|>" {_CHANNEL} " to=" {recipient} | " to=" {recipient} "<|channel|>" {_CHANNEL}) {_CONTENT_TYPE}'
    return _sequence(_grammar(header), shape.arguments.element(), _CALL_END)


def _call_rest(shape: CallShape, namespace: str) -> dict[str, Any] | None:
    """A call in `namespace` after the prompt wrote `to=namespace.`: the name, the content type, the message."""
    if shape.any_name and shape.recipient == namespace:
        name = _NAME
    elif not shape.any_name and shape.recipient.startswith(namespace + "."):
        name = _quoted(shape.recipient[len(namespace) + 1 :])
    else:
        return None
    return _sequence(_grammar(f"root ::= {name} {_CONTENT_TYPE}"), shape.arguments.element(), _CALL_END)


def _quoted(text: str) -> str:
    return orjson.dumps(text).decode()


def _grammar(ebnf: str) -> dict[str, Any]:
    return {"type": "grammar", "grammar": ebnf}


def _sequence(*elements: dict[str, Any]) -> dict[str, Any]:
    return {"type": "sequence", "elements": list(elements)}


def _or(elements: list[dict[str, Any]]) -> dict[str, Any]:
    return elements[0] if len(elements) == 1 else {"type": "or", "elements": elements}
