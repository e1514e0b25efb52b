"""Custom tools' input grammars: checked when a call completes, so the model can be asked to call again.

Both the grammar (the client's) and the text (the model's) are hostile. A `regex` grammar runs on RE2,
linear in the text, but its compile is linear in a program that bounded repetitions multiply: it is
compiled and matched in an isolation worker (runtime/isolation.py), never on the event loop. A `lark`
grammar is built and run by Lark's LALR parser in a worker process with a time limit: Lark matches terminals with Python's backtracking `re`, so a terminal like `(a+)+$` could
otherwise hold the event loop; the worker is killed when the limit passes.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import anyio
import anyio.to_process

from runtime.isolation import TooCostly, run_isolated

from .schemas import UnsupportedRegex, re2_pattern

CHECK_TIMEOUT_S = 5.0
MAX_MESSAGE_CHARS = 300


class InvalidGrammar(ValueError):
    """The grammar cannot be used: the client's 400."""


def regex_problem(definition: str, text: str | None) -> str | None:
    """In an isolation worker: why the regex cannot be compiled ("grammar: ..."), why the text does not
    match it, or None. With `text` None only the regex is compiled."""
    try:
        compiled = re2_pattern(definition)
    except UnsupportedRegex as exc:
        return f"grammar: the regex {exc}"
    if text is None or compiled.fullmatch(text):
        return None
    return f"the input does not match the regex {definition[:MAX_MESSAGE_CHARS]!r}"


async def _regex_in_worker(definition: str, text: str | None, tenant: str) -> str | None:
    try:
        return await run_isolated(CHECK_TIMEOUT_S, regex_problem, definition, text, tenant=tenant)
    except TooCostly as exc:
        return f"grammar: the regex could not be compiled within the limits ({exc})" if text is None else f"it could not be checked ({exc})"


@lru_cache(maxsize=32)
def _lark(definition: str) -> Any:
    from lark import Lark
    from lark.exceptions import LarkError

    try:
        return Lark(definition, parser="lalr", start="start")
    except LarkError as exc:
        raise InvalidGrammar(f"the Lark grammar cannot be built as LALR with a `start` rule: {str(exc)[:MAX_MESSAGE_CHARS]}") from None


def lark_problem(definition: str, text: str | None) -> str | None:
    """In the worker process: why the grammar cannot be built ("grammar: ..."), why the text does not
    match it, or None. With `text` None only the grammar is built."""
    from lark.exceptions import LarkError

    try:
        parser = _lark(definition)
    except InvalidGrammar as exc:
        return f"grammar: {exc}"
    if text is None:
        return None
    try:
        parser.parse(text)
    except LarkError as exc:
        return str(exc)[:MAX_MESSAGE_CHARS]
    return None


async def _in_worker(definition: str, text: str | None) -> str | None:
    with anyio.move_on_after(CHECK_TIMEOUT_S):
        return await anyio.to_process.run_sync(lark_problem, definition, text, cancellable=True)
    return f"it could not be checked against the grammar within {CHECK_TIMEOUT_S:g} s"


async def check_grammar(syntax: str, definition: str, tenant: str = "") -> None:
    """At request time: a grammar that cannot be built is the client's 400 (`InvalidGrammar`)."""
    problem = await (_regex_in_worker(definition, None, tenant) if syntax == "regex" else _in_worker(definition, None))
    if problem is not None:
        raise InvalidGrammar(problem.removeprefix("grammar: "))


async def input_problem(syntax: str, definition: str, text: str, tenant: str = "") -> str | None:
    """Why a call's input does not match its tool's grammar, in a sentence for the model; None if it does."""
    if syntax == "regex":
        return await _regex_in_worker(definition, text, tenant)
    problem = await _in_worker(definition, text)
    return None if problem is None else f"the input does not match the grammar: {problem}"
