"""An engine emulator: vLLM's `/v1/completions` wire protocol with a scripted gpt-oss model behind it.

The one test double of the project: it stands in for the GPU. It decodes and parses the Harmony prompt
it receives (a malformed prompt is a 400, as a confused model would be a failed test), answers with
real Harmony token ids in chunks of 1-4 tokens, and follows vLLM's rules: `max_tokens` defaults to 16,
`token_ids` only with `return_token_ids`, `prompt_token_ids` on the first chunk, stop ids honoured,
`finish_reason` `stop`/`length`, usage only when asked, errors as vLLM shapes them.

The scripted model reads directives in brackets from the last user message (see `Script.plan`).
Run: `python -m tests.emulator --port 8000 [--model NAME] [--max-model-len N] [--chunk-delay-ms D]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field

from openai_harmony import Message, Role
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gateway.engine import harmony

from . import grammar_check

MODEL = "openai/gpt-oss-20b"
ASSISTANT_START = [harmony.START, 173781]  # <|start|>assistant


@dataclass
class Stats:
    requests: int = 0
    active: int = 0
    completed: int = 0
    aborted: int = 0
    last_request: dict = field(default_factory=dict)
    # Completions a request's structural tag forbade that were written anyway, where the script meant no harm:
    # the grammar forbade what a well-formed model writes (tests/conftest.py fails the test).
    grammar_violations: list = field(default_factory=list)  # the last few
    violation_count: int = 0
    embeddings_held: dict = field(default_factory=dict)  # `[embedding-held KEY]` calls made, by KEY
    grammar_ignored: int = 0  # calls whose grammar was taken and not enforced (--ignore-grammar)
    constrained: int = 0  # completions checked against a structural tag
    last_prompt: str = ""
    last_headers: dict = field(default_factory=dict)
    # The headers of the latest call for each user message (the last one of its prompt), the last 200 such: a
    # test finds its own calls there while other tests' leftover work calls too.
    headers_by_input: dict = field(default_factory=dict)
    recent_prompts: list = field(default_factory=list)  # the last few prompts, decoded, oldest first
    # Reasoning summaries' own calls (made beside the turn's, at once): kept apart, so that `last_*` is the turn's.
    summary_requests: list = field(default_factory=list)  # the last few, each {"request", "prompt"}
    summary_calls: int = 0  # all of them
    embedding_calls: int = 0  # /v1/embeddings requests
    session_keys: list = field(default_factory=list)  # the `x-session-key` header of each completion request, the last 200
    embedded_texts: int = 0


@dataclass
class Plan:
    """What the model writes (Harmony text, special tokens included) and how it misbehaves."""

    text: str
    stall_after: int | None = None  # tokens sent before going silent forever
    drop_after: int | None = None  # tokens of the writing (the prompt's part included) before closing the connection without [DONE]
    # Once-only faults, at the Nth token of the assistant's writing (what the prompt already holds of it
    # counted): a call the gateway continues from there is past it, and goes on unharmed.
    crash_at: int | None = None  # the connection closed without [DONE]
    crash_error_at: int | None = None  # a `data: {"error": ...}` line
    error_after: int | None = None  # the same, before a `data: {"error": ...}` line
    status: int | None = None  # answer with this HTTP error instead
    chunk_delay: float | None = None
    held: str | None = None  # `[held KEY]`: nothing is sent until the test releases KEY (a minute at most)
    chunk_tokens: int | None = None  # tokens in every chunk (the last may have fewer); None: 1 to 4 at random
    # Under a structural tag: what the model writes instead when the grammar forbids `text` (`[[constrained
    # HARMONY]]`, in order), and whether breaking it is the test's point (`[misbehave]`, and the faults).
    alternatives: list[str] = field(default_factory=list)
    misbehaves: bool = False
    # Hostile engine output: `[repeat ID N]` writes the final answer as N copies of token ID (whitespace a
    # model loops on); `[garbage KIND]` sends token ids out of the vocabulary (oov) or not integers (text);
    # `[comments]` sends SSE comment lines forever after the first chunk; `[overflow]` ignores max_tokens.
    repeat: tuple[int, int] | None = None
    garbage: str | None = None
    comments: bool = False
    overflow: bool = False


class Script:
    """The scripted model. Directives in the last user message choose what it writes."""

    def __init__(self, messages: list[Message], prefill: str = "") -> None:
        self.messages = messages
        self.prefill = prefill  # what the prompt already wrote of the assistant's message

    def _text_of(self, message: Message) -> str:
        return "".join(getattr(part, "text", "") for part in message.content)

    def plan(self) -> Plan:
        summary = self._summary()
        if summary is not None:  # a reasoning summary's own engine call: none of the turn's faults apply
            return summary
        plan = (self._continue_turn() or self._continue_prefill()) if self.prefill else self._write()
        self._apply_faults(plan)
        said = self._text_of(self.messages[self._asked()])
        plan.alternatives = re.findall(r"\[\[constrained (.*?)\]\]", said, re.DOTALL)
        plan.misbehaves = plan.misbehaves or "[misbehave]" in said
        return plan

    def _asked(self) -> int:
        """The user message the model answers: the last one; but with `[notes]` in an earlier one, user messages
        right after a tool's result (a client's notes beside it: Claude Code's "Tool loaded.") are not new asks."""
        users = [i for i, m in enumerate(self.messages) if m.author.role == Role.USER]
        for position in range(len(users) - 1, 0, -1):
            before = next((m for m in reversed(self.messages[: users[position]]) if m.author.role != Role.DEVELOPER), None)
            if before is None or before.author.role != Role.TOOL:
                break
            if "[notes]" in self._text_of(self.messages[users[position - 1]]):
                return users[position - 1]
        return users[-1]

    def _summary(self) -> Plan | None:
        """Asked to summarise a reasoning item (the gateway's `reasoning.summary`): a bold title and a sentence
        naming what the reasoning began with. `[summary-fails]` in the reasoning: an HTTP 500;
        `[summary-slow]`: a long summary, written slowly."""
        asked = self._text_of(self.messages[-1]) if self.messages[-1].author.role == Role.USER else ""
        if not asked.startswith("Summarize the reasoning below"):
            return None
        reasoning = asked.split("The reasoning:\n\n", 1)[-1]
        plan = Plan(f"<|channel|>analysis<|message|>A title, then a sentence.<|end|><|start|>assistant<|channel|>final<|message|>"
                    f"**Working it out**\n\nI am thinking about this: {reasoning[:60]}<|return|>")  # fmt: skip
        if "[summary-fails]" in reasoning:
            plan.status = 500
        if "[summary-slow]" in reasoning:
            plan.text = plan.text.replace("<|return|>", " and more" * 200 + "<|return|>")
            plan.chunk_delay, plan.chunk_tokens = 0.05, 1
        return plan

    def _continue_turn(self) -> Plan | None:
        """The prompt ends with part of what this model writes for it (the gateway continues a call it had
        begun, on another replica): the rest of it."""
        try:
            whole = self._write().text
        except ValueError:  # no user message to answer
            return None
        if not whole.startswith(self.prefill):
            return None
        return Plan(whole[len(self.prefill) :])

    def _progress(self, start: int, end: int) -> int:
        """Tool results since message `start`, up to `end`: those a compaction summary counted
        (`[[done K]]`, as this model writes its summaries), and those after it."""
        done, since = 0, start
        for index in range(start, end):
            message = self.messages[index]
            if message.author.role == Role.ASSISTANT and (found := re.search(r"\[\[done (\d+)\]\]", self._text_of(message))):
                done, since = int(found.group(1)), index
        return done + sum(1 for m in self.messages[since:end] if m.author.role == Role.TOOL)

    def _write(self) -> Plan:
        last = self.messages[-1]
        user_index = self._asked()
        if self._text_of(self.messages[user_index]).startswith("Context compaction:"):  # asked to summarise
            task = max((i for i, m in enumerate(self.messages[:user_index]) if m.author.role == Role.USER), default=0)
            return Plan(f"<|channel|>final<|message|>[[done {self._progress(task, user_index)}]] The work goes on.<|return|>")
        # Claude Code asks for a summary of the conversation in its own words (its compaction): a short one.
        if "followed by a <summary> block" in self._text_of(self.messages[-1]):
            return Plan(
                "<|channel|>final<|message|><analysis>What was done.</analysis>\n<summary>The user asked for counts; they ran.</summary><|return|>"
            )
        # `[[raw HARMONY]]`: the model writes exactly this, however broken (gpt-oss's failure shapes).
        if raw := re.search(r"\[\[raw (.*?)\]\]", self._text_of(self.messages[user_index]), re.DOTALL):
            if last.author.role == Role.USER:
                return Plan(raw.group(1), misbehaves=True)
        # Told its answer broke the response's format (the gateway's check where no grammar held it):
        # `[[corrected HARMONY]]` is what it answers then; without one it answers as before.
        asked = self._text_of(self.messages[user_index])
        if last.author.role == Role.DEVELOPER and self._text_of(last).startswith("Your answer does not fit"):
            if corrected := re.search(r"\[\[corrected (.*?)\]\]", asked, re.DOTALL):
                return Plan(corrected.group(1))
        # `[[python CODE]]` and `[[call RECIPIENT {json}]]` directives, in order: the k-th one is made
        # after k-1 tool results of this turn.
        steps = re.findall(r"\[\[(python|call|browser) (.*?)\]\]", self._text_of(self.messages[user_index]), re.DOTALL)
        results = self._progress(user_index, len(self.messages))
        if results < len(steps):
            kind, text = steps[results]
            if kind == "python":
                call = f"<|channel|>analysis to=python code<|message|>{text}<|call|>"
            elif kind == "browser":  # `[[browser search {"query": "..."}]]`, as gpt-oss calls its browser
                function, arguments = text.split(" ", 1)
                call = f"<|channel|>analysis to=browser.{function} code<|message|>{arguments}<|call|>"
            else:
                recipient, arguments = text.split(" ", 1)
                call = f"<|channel|>commentary to={recipient} <|constrain|>json<|message|>{arguments}<|call|>"
            return Plan(f"<|channel|>analysis<|message|>I will make tool call {results + 1}.<|end|><|start|>assistant{call}")
        # After the last tool result, or after a compaction summary that counted every step done.
        if last.author.role == Role.TOOL or (steps and results >= len(steps)):
            result = self._text_of(last)
            # `[[answer TEXT]]`: what the model answers after its tool calls (citations, say).
            asked = self._text_of(self.messages[user_index])
            answer = re.search(r"\[\[answer (.*?)\]\]", asked, re.DOTALL)
            preamble = "<|channel|>commentary<|message|>Here is what I found.<|end|><|start|>assistant" if "[preamble]" in asked else ""
            return Plan(
                f"<|channel|>analysis<|message|>The tool {last.author.name} answered.<|end|><|start|>assistant{preamble}"
                f"<|channel|>final<|message|>{answer.group(1) if answer else 'The tool said: ' + result}<|return|>"
            )
        user = next((m for m in reversed(self.messages) if m.author.role == Role.USER), None)
        # What the model echoes of the user's words: without the directives that hold Harmony text.
        said = re.sub(r" ?\[\[(?:constrained|corrected|raw) .*?\]\]", "", self._text_of(user) if user else "", flags=re.DOTALL)
        final = f"You said: {said}"
        analysis = f"The user said {said!r}. I will answer."

        if m := re.search(r"\[long (\d+)\]", said):
            final = " ".join(f"word{i}" for i in range(int(m.group(1))))
        if "[recall]" in said:
            users = [self._text_of(m) for m in self.messages if m.author.role == Role.USER]
            analyses = sum(1 for m in self.messages if m.author.role == Role.ASSISTANT and m.channel == "analysis")
            finals = [self._text_of(m) for m in self.messages if m.author.role == Role.ASSISTANT and m.channel == "final"]
            final = f"users={users} finals={finals} analysis_in_prompt={analyses}"
        if "[instructions]" in said:
            developer = [self._text_of(m) for m in self.messages if m.author.role == Role.DEVELOPER]
            system = self._text_of(self.messages[0])
            effort = re.search(r"Reasoning: (\w+)", system)
            final = f"developer={developer} effort={effort.group(1) if effort else None}"
        if "[unicode]" in said:
            final = "Héllo 你好世界 🎉🎉 — ok"
        if "[empty-final]" in said:
            final = ""
        if m := re.search(r"\[repeat (\d+) (\d+)\]", said):
            final = REPEAT_MARK

        body = ""
        if "[noanalysis]" not in said:
            body += f"<|channel|>analysis<|message|>{analysis}<|end|><|start|>assistant"
        if "[preamble]" in said:
            body += "<|channel|>commentary<|message|>Let me think about that.<|end|><|start|>assistant"
        if m := re.search(r"\[freeform (\S+?) (.*?)\]\]", said, re.DOTALL):  # a raw-text (custom tool) call
            body += f"<|channel|>commentary to={m.group(1)}<|message|>{m.group(2)}<|call|>"
            return Plan(body)
        if m := re.search(r"\[call (\S+?) (\{.*?\})( recipient-first)?\]", said):
            recipient, arguments = m.group(1), m.group(2)
            if m.group(3):
                body += f" to={recipient}<|channel|>commentary <|constrain|>json<|message|>{arguments}<|call|>"
            else:
                body += f"<|channel|>commentary to={recipient} <|constrain|>json<|message|>{arguments}<|call|>"
            return Plan(body)
        body += f"<|channel|>final<|message|>{final}<|return|>"
        return Plan(body)

    def _apply_faults(self, plan: Plan) -> None:
        """Fault and delay directives, for any engine call of the turn: `[FAULT]` on every call, `[FAULT@K]`
        on the K-th (1 = the first after the user's message, K = one more than the tool results since),
        with a token count where it applies: `[drop@2 10]` drops the second call's stream after 10 tokens.
        Faults: stall (silence forever), drop (connection closed without [DONE]), midstream-error,
        error500 (HTTP 500 before the stream), malformed (invalid Harmony), slow MS (delay per chunk); and
        `[chunk N]`: N tokens in every chunk; `[held KEY]`: every call waits, before its first token, until
        the test releases KEY (`POST /_emulator/release/KEY`). Once only (a continuation from there goes on unharmed): crash
        (connection closed at the Nth token of the call's writing), crash-error (an error line there)."""
        user_index = self._asked()
        said = self._text_of(self.messages[user_index])
        call = 1 + sum(1 for m in self.messages[user_index:] if m.author.role == Role.TOOL)
        if m := re.search(r"\[repeat (\d+) (\d+)\]", said):
            plan.repeat = (int(m.group(1)), int(m.group(2)))
        if m := re.search(r"\[garbage (oov|text)\]", said):
            plan.garbage = m.group(1)
        plan.comments = "[comments]" in said
        plan.overflow = "[overflow]" in said
        if m := re.search(r"\[held (\w+)\]", said):
            plan.held = m.group(1)
        for name, at, count in re.findall(
            r"\[(stall|drop|midstream-error|error500|malformed|slow|chunk|crash-error|crash)(?:@(\d+))?(?: (\d+))?\]", said
        ):
            if at and int(at) != call:
                continue
            after = int(count) if count else 6
            if name == "stall":
                plan.stall_after = after
            elif name == "drop":
                plan.drop_after = after
            elif name == "midstream-error":
                plan.error_after = after
            elif name == "crash":
                plan.crash_at = after
            elif name == "crash-error":
                plan.crash_error_at = after
            elif name == "error500":
                plan.status = 500
            elif name == "malformed":
                plan.text = "<|channel|>final<|end|>"
                plan.misbehaves = True
            elif name == "chunk" and count:
                plan.chunk_tokens = max(1, int(count))
            elif count:
                plan.chunk_delay = int(count) / 1000

    def _continue_prefill(self) -> Plan:
        """A forced tool call: the gateway wrote the header (or part of it); write the rest."""
        user_index = self._asked()
        # `[args {json}]` directives, in order: the k-th forced call writes the k-th (or the last).
        found = re.findall(r"\[args (\{.*?\})\]", self._text_of(self.messages[user_index]))
        calls = sum(1 for m in self.messages[user_index:] if m.author.role == Role.TOOL)
        arguments = found[min(calls, len(found) - 1)] if found else "{}"
        if "to=python" in self.prefill:  # `[code ...]`: what a forced python call runs
            code = re.search(r"\[code (.*?)\]", self._text_of(self.messages[user_index]))
            return Plan(f"{code.group(1) if code else 'print(1)'}<|call|>")
        if self.prefill.endswith("<|message|>"):
            return Plan(f"{arguments}<|call|>")
        # Only the recipient's namespace is written: pick its first tool, as declared in the prompt.
        namespace = self.prefill.rsplit("to=", 1)[1].rstrip(".")
        declared = "".join(self._text_of(m) for m in self.messages if m.author.role in (Role.SYSTEM, Role.DEVELOPER))
        section = declared[declared.index(f"namespace {namespace} {{") :]
        name = re.search(r"type (\w+) = ", section).group(1)
        return Plan(f"{name} <|constrain|>json<|message|>{arguments}<|call|>")


def _turn_start(prompt: list[int], continued: bool) -> int | None:
    """Where the assistant's writing begins: the last `<|start|>assistant`, or with `continued`, the first
    one after the last message of another author."""
    found = None
    for index in range(len(prompt) - 2, -1, -1):
        if prompt[index] != harmony.START:
            continue
        if prompt[index + 1] != ASSISTANT_START[1]:
            return found
        found = index
        if not continued:
            return found
    return found


def _continues(encoding, prompt: list[int], start: int) -> bool:
    """The prompt ends with part of the turn the scripted model writes for it."""
    tail = prompt[start + 2 :]
    if harmony.END not in tail and harmony.START not in tail:
        return False  # nothing but (part of) one message: a forced call's header, handled as before
    try:
        messages = encoding.parse_messages_from_completion_tokens(prompt[:start], None)
    except Exception:
        return False
    return Script(messages, encoding.decode(tail))._continue_turn() is not None


TAG_REFUSED = "Invalid structured_outputs structural_tag specification."
REPEAT_MARK = "\u2063REPEAT\u2063"  # where `[repeat ID N]` puts its tokens in the plan's text


def constrained(tag: str, plan: Plan, generated: list[int], encoding, stats: Stats) -> list[int]:
    """What the model writes under the tag: its plan where the grammar allows it, else the first alternative
    it allows. A plan nothing rescues is written as it is (as a model escaping its grammar would), and
    recorded unless breaking the grammar is the script's point."""
    stats.constrained += 1
    if grammar_check.accepts(tag, generated):
        return generated
    for alternative in plan.alternatives:
        tokens = encoding.encode(alternative, allowed_special="all")
        if grammar_check.accepts(tag, tokens):
            return tokens
    if not plan.misbehaves:
        stats.violation_count += 1
        stats.grammar_violations = stats.grammar_violations[-9:] + [plan.text]
    return generated


def raw_json(value: object) -> str:
    """JSON as vLLM writes its stream chunks: raw UTF-8, so U+2028 and friends arrive unescaped."""
    return json.dumps(value, ensure_ascii=False)


def vllm_error(status: int, message: str, param: str | None = None) -> JSONResponse:
    kinds = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError"}
    return JSONResponse(
        {"error": {"message": message, "type": kinds.get(status, "InternalServerError"), "param": param, "code": status}},
        status_code=status,
    )


EMBEDDING_MODEL, EMBEDDING_DIMENSIONS = "emulator-embedding", 64
# The embedding model's "meaning": words of one concept land on the same vector component, so that a search by
# meaning finds what a search by words cannot (a car is an automobile).
CONCEPTS = {"car": "automobile", "vehicle": "automobile", "automobile": "automobile", "puppy": "dog", "canine": "dog", "hound": "dog"}


def embedding(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic embedding: hashed words (their concepts), counted, normalised. Related texts share words."""
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.lower()):
        concept = CONCEPTS.get(word, word)
        digest = int.from_bytes(hashlib.blake2b(concept.encode(), digest_size=8).digest(), "big")
        vector[digest % dimensions] += 1.0 if (digest >> 32) & 1 else -1.0
    norm = sum(value * value for value in vector) ** 0.5
    return [value / norm for value in vector] if norm else vector


VLLM_VERSION = "0.11.1"  # what /version says by default: a vLLM whose completions read `structured_outputs`


def create_emulator(
    max_model_len: int = 131072,
    chunk_delay: float = 0.0,
    model: str = MODEL,
    listed_length: str | None = None,
    version: str | None = VLLM_VERSION,
    ignores_grammar: bool = False,
) -> Starlette:
    """`version`: what /version says (None: no such route); `ignores_grammar`: `structured_outputs` is
    accepted and nothing is enforced, as a vLLM before 0.10.2 does (it ignores fields it does not know)."""
    stats = Stats()
    threading.Thread(target=grammar_check.warm, daemon=True).start()  # xgrammar loads while the first requests come
    encoding = harmony.encoding()

    async def models(request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": model,
                        "object": "model",
                        "created": 1763000000,
                        "owned_by": "vllm",
                        "root": model,
                        "max_model_len": max_model_len if listed_length is None else listed_length,
                    }
                ],
            }
        )

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    async def get_version(request: Request) -> Response:
        if version is None:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        if version == "hang":  # a router in front that holds what it does not route
            await asyncio.sleep(3600)
        return JSONResponse({"version": version})

    async def get_stats(request: Request) -> Response:
        return JSONResponse(stats.__dict__)

    async def completions(request: Request) -> Response:
        stats.requests += 1
        try:
            body = await request.json()
        except ValueError:
            return vllm_error(400, "Invalid JSON body")
        sent = {k: v for k, v in body.items() if k != "prompt"}
        turns = stats.last_request, stats.last_headers  # kept if this is a summary's call
        stats.last_request, stats.last_headers = sent, dict(request.headers)
        prompt = body.get("prompt")
        stats.session_keys = [*stats.session_keys[-199:], request.headers.get("x-session-key")]
        if body.get("model") != model:
            return vllm_error(404, f"The model `{body.get('model')}` does not exist.", "model")
        if not isinstance(prompt, list) or not all(isinstance(t, int) for t in prompt):
            return vllm_error(400, "The emulator expects the prompt as a list of Harmony token ids.", "prompt")
        # The prompt ends with `<|start|>assistant`, possibly followed by the start of the assistant's message;
        # or, in a call the gateway continues (a run adopted by another replica), by what the model wrote of
        # its turn so far, whole messages and part of one. Searched from the end: a long prompt is not scanned whole.
        last_start = _turn_start(prompt, continued=True)
        if last_start is None or not _continues(encoding, prompt, last_start):
            last_start = _turn_start(prompt, continued=False)
            if last_start is None or harmony.END in prompt[last_start + 2 :] or harmony.START in prompt[last_start + 2 :]:
                return vllm_error(400, "Harmony prompt must end with <|start|>assistant", "prompt")
        history, prefill = prompt[:last_start], prompt[last_start + 2 :]
        try:
            messages = encoding.parse_messages_from_completion_tokens(history, None)
        except Exception as exc:  # a malformed prompt
            return vllm_error(400, f"Malformed Harmony prompt: {exc}", "prompt")
        if not messages or messages[0].author.role != Role.SYSTEM:
            return vllm_error(400, "Harmony prompt must start with a system message", "prompt")
        decoded = encoding.decode(prompt)
        if "<|start|>user<|message|>Summarize the reasoning below" in decoded:
            stats.summary_requests = stats.summary_requests[-7:] + [{"request": sent, "prompt": decoded}]
            stats.summary_calls += 1
            stats.last_request, stats.last_headers = turns
        else:
            stats.last_prompt = decoded
            stats.recent_prompts = stats.recent_prompts[-7:] + [decoded]
            users = [message for message in messages if message.author.role == Role.USER]
            if users:
                said = "".join(getattr(part, "text", "") for part in users[-1].content)
                kept = list(stats.headers_by_input.items())[-199:]
                stats.headers_by_input = dict(kept) | {said: dict(request.headers)}

        if len(prompt) >= max_model_len:
            return vllm_error(
                400,
                f"This model's maximum context length is {max_model_len} tokens. However, your request has "
                f"{len(prompt)} input tokens. Please reduce the length of the input messages.",
                "input_tokens",
            )
        max_tokens = body.get("max_tokens", 16)  # vLLM's default
        if max_tokens > max_model_len:
            return vllm_error(400, f"max_tokens must be at most {max_model_len}", "max_tokens")
        max_tokens = min(max_tokens, max_model_len - len(prompt))

        plan = Script(messages, encoding.decode(prefill) if prefill else "").plan()
        if plan.status:
            return vllm_error(plan.status, "EngineCore encountered an issue.")
        if plan.repeat is not None and REPEAT_MARK in plan.text:  # made as ids: the tokenizer never sees the run
            before, after = plan.text.split(REPEAT_MARK, 1)
            token, count = plan.repeat
            generated = [*encoding.encode(before, allowed_special="all"), *[token] * count, *encoding.encode(after, allowed_special="all")]
        else:
            generated = encoding.encode(plan.text, allowed_special="all")
        tag = (body.get("structured_outputs") or {}).get("structural_tag") if isinstance(body.get("structured_outputs"), dict) else None
        if "structured_outputs" in body and ignores_grammar:
            stats.grammar_ignored += 1
        elif "structured_outputs" in body:
            # An engine without structured outputs (no xgrammar here), told so by the script, or a tag it cannot read.
            if not isinstance(tag, str) or "[refuse-grammar]" in stats.last_prompt or not grammar_check.available():
                return vllm_error(400, TAG_REFUSED, "structured_outputs")
            try:
                generated = await asyncio.to_thread(constrained, tag, plan, generated, encoding, stats)
            except grammar_check.InvalidTag:
                return vllm_error(400, TAG_REFUSED, "structured_outputs")
        stops = set(body.get("stop_token_ids") or []) | {harmony.RETURN}
        cut = next((i + 1 for i, t in enumerate(generated) if t in stops), len(generated))
        finish = "stop"
        if cut > max_tokens and not plan.overflow:
            cut, finish = max_tokens, "length"
        generated = generated[:cut]
        stop_reason = generated[-1] if finish == "stop" and generated and generated[-1] != harmony.RETURN else None
        return_ids = bool(body.get("return_token_ids"))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        rng = random.Random(body.get("seed", len(prompt)))
        created = int(time.time())
        completion_id = f"cmpl-{rng.getrandbits(64):016x}"

        def text_of(ids: list[int]) -> str:
            ids = [t for t in ids if t not in (harmony.RETURN,)]
            return encoding.decode(ids) if ids and not plan.garbage else ""

        wanted_logprobs = body.get("logprobs")
        by_id = bool(body.get("return_tokens_as_token_ids"))

        def logprobs_of(ids: list[int]) -> dict | None:
            """vLLM's completion logprobs: per token its logprob and a dict of the N likeliest tokens (the
            sampled one among them), keyed by text or, when asked, by "token_id:N". Values are made up
            deterministically: the sampled token is the likeliest, alternatives are ids just above it."""
            if wanted_logprobs is None:
                return None
            name = (lambda t: f"token_id:{t}") if by_id else (lambda t: encoding.decode([t]))
            values = [-round(0.05 + (t % 13) / 20, 4) for t in ids]
            tops = [{name(t + k): round(value - k, 4) for k in range(max(wanted_logprobs, 1))} for t, value in zip(ids, values)]
            return {"tokens": [name(t) for t in ids], "token_logprobs": values, "top_logprobs": tops, "text_offset": [0] * len(ids)}

        if not body.get("stream"):
            stats.completed += 1
            choice = {"index": 0, "text": text_of(generated), "logprobs": logprobs_of(generated), "finish_reason": finish, "stop_reason": stop_reason}
            if return_ids:
                choice |= {"token_ids": generated, "prompt_token_ids": prompt}
            usage = {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(generated),
                "total_tokens": len(prompt) + len(generated),
                "prompt_tokens_details": None,
            }
            return JSONResponse(
                {"id": completion_id, "object": "text_completion", "created": created, "model": model, "choices": [choice], "usage": usage}
            )

        delay = plan.chunk_delay if plan.chunk_delay is not None else chunk_delay

        async def stream():
            stats.active += 1
            finished = False
            try:
                sent = 0
                first = True
                if plan.held is not None:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(held_until(plan.held).wait(), 60)
                # A lasting fault the call's writing is already past (a continuation): it fails before its first token.
                if plan.drop_after is not None and len(prefill) >= plan.drop_after:
                    raise ConnectionAbortedError("emulated engine crash")
                if plan.error_after is not None and len(prefill) >= plan.error_after:
                    yield 'data: {"error": {"message": "EngineCore died unexpectedly", "type": "InternalServerError", "param": null, "code": 500}}\n\n'
                    yield "data: [DONE]\n\n"
                    finished = True
                    return
                while sent < len(generated):
                    size = plan.chunk_tokens or rng.randint(1, 4)
                    ids = generated[sent : sent + size]
                    sent += len(ids)
                    last = sent >= len(generated)
                    choice = {
                        "index": 0,
                        "text": text_of(ids),
                        "logprobs": logprobs_of(ids),
                        "finish_reason": finish if last else None,
                        "stop_reason": stop_reason if last else None,
                    }
                    if return_ids:
                        choice["token_ids"] = ids
                        if plan.garbage and sent > 8:
                            choice["token_ids"] = [300000] if plan.garbage == "oov" else ["7"]
                        if first:
                            choice["prompt_token_ids"] = prompt
                    first = False
                    chunk = {"id": completion_id, "object": "text_completion", "created": created, "model": model, "choices": [choice], "usage": None}
                    yield f"data: {raw_json(chunk)}\n\n"
                    if plan.stall_after is not None and sent >= plan.stall_after:
                        await asyncio.sleep(3600)
                    while plan.comments and sent > 8:  # alive, but never another token
                        yield ": keep-alive\n\n"
                        await asyncio.sleep(0.05)
                    written = len(prefill) + sent  # of the assistant's writing, the prompt's part of it included
                    if plan.crash_at is not None and len(prefill) < plan.crash_at <= written:
                        raise ConnectionAbortedError("emulated engine crash, once")
                    if plan.crash_error_at is not None and len(prefill) < plan.crash_error_at <= written:
                        yield 'data: {"error": {"message": "EngineCore died unexpectedly", "type": "InternalServerError", "param": null, "code": 500}}\n\n'
                        yield "data: [DONE]\n\n"
                        finished = True
                        return
                    # Lasting faults count the call's writing too: a continuation past the point fails at once.
                    if plan.drop_after is not None and written >= plan.drop_after:
                        raise ConnectionAbortedError("emulated engine crash")
                    if plan.error_after is not None and written >= plan.error_after:
                        yield 'data: {"error": {"message": "EngineCore died unexpectedly", "type": "InternalServerError", "param": null, "code": 500}}\n\n'
                        yield "data: [DONE]\n\n"
                        finished = True
                        return
                    if delay:
                        await asyncio.sleep(delay)
                if include_usage:
                    usage = {
                        "prompt_tokens": len(prompt),
                        "completion_tokens": len(generated),
                        "total_tokens": len(prompt) + len(generated),
                        "prompt_tokens_details": {"cached_tokens": 16},
                    }
                    yield f"data: {raw_json({'id': completion_id, 'object': 'text_completion', 'created': created, 'model': model, 'choices': [], 'usage': usage})}\n\n"
                yield "data: [DONE]\n\n"
                finished = True
            finally:
                stats.active -= 1
                if finished:
                    stats.completed += 1
                else:
                    stats.aborted += 1

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def embeddings(request: Request) -> Response:
        """vLLM's pooling runner's `/v1/embeddings`; `[embedding-fails]` in a text makes it a 500,
        `[embedding-slow]` makes it answer after 4 s, and `[embedding-held KEY]` once the test releases KEY
        (`POST /_emulator/release/KEY`; a minute at most): a replica killed meanwhile."""
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        stats.embedding_calls += 1
        stats.embedded_texts += len(texts)
        if any("[embedding-fails]" in text for text in texts):
            return vllm_error(500, "the embedding model failed")
        if any("[embedding-slow]" in text for text in texts):
            await asyncio.sleep(4)
        for key in {found for text in texts for found in re.findall(r"\[embedding-held (\w+)\]", text)}:
            stats.embeddings_held[key] = stats.embeddings_held.get(key, 0) + 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(held_until(key).wait(), 60)
        # A model named with a size (`emulator-embedding-32`) answers vectors of that many dimensions.
        sized = re.fullmatch(r".*-(\d+)", str(body.get("model", "")))
        dimensions = int(sized.group(1)) if sized else EMBEDDING_DIMENSIONS
        data = [{"object": "embedding", "index": index, "embedding": embedding(text, dimensions)} for index, text in enumerate(texts)]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return JSONResponse({"object": "list", "model": body.get("model"), "data": data, "usage": usage})

    releases: dict[str, asyncio.Event] = {}

    def held_until(key: str) -> asyncio.Event:
        return releases.setdefault(key, asyncio.Event())

    async def release(request: Request) -> Response:
        held_until(request.path_params["key"]).set()
        return JSONResponse({"released": request.path_params["key"]})

    return Starlette(
        routes=[
            Route("/_emulator/release/{key}", release, methods=["POST"]),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/models", models),
            Route("/health", health),
            Route("/version", get_version),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/_emulator/stats", get_stats),
        ]
    )


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-model-len", type=int, default=131072)
    parser.add_argument("--chunk-delay-ms", type=float, default=0.0)
    parser.add_argument("--model", default=MODEL, help="the served model name")
    parser.add_argument("--listed-max-model-len", default=None, help="what /v1/models says max_model_len is, as text (garbage)")
    parser.add_argument("--vllm-version", default=VLLM_VERSION, help="what /version says; 'none': no /version; 'hang': never answers")
    parser.add_argument("--ignore-grammar", action="store_true", help="take structured_outputs and enforce nothing")
    args = parser.parse_args()
    version = None if args.vllm_version == "none" else args.vllm_version
    app = create_emulator(args.max_model_len, args.chunk_delay_ms / 1000, args.model, args.listed_max_model_len, version, args.ignore_grammar)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
