"""Checking a strict function's arguments against its JSON Schema (jsonschema, Draft 2020-12).

Validators are compiled once per distinct schema and kept in a bounded cache: clients send the same
tools with every request. The schema comes from the client and the arguments from the model, so both
are hostile: `pattern` and `patternProperties` run on RE2, whose matching is linear in the text (a
backtracking `(a+)+$` cannot stall the event loop), and `$ref` resolves inside the schema only
(jsonschema never fetches remote references).

A schema's size is no measure of its cost: 40 nested `anyOf` pairs reached through `$defs` is 3 KB and
2^40 branches. At request time a schema is refused when the subschemas one value may be checked against
(every `$ref` expanded) pass `MAX_SCHEMA_COST`, or when it refers to itself without descending into the
value (`{"$ref": "#"}`: a check that never ends). At call time arguments are checked in a worker process
with a time and memory limit (isolation.py), since no static bound covers every schema and value.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from functools import lru_cache
from typing import Any, Iterator
from urllib.parse import unquote

import re2
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from referencing.exceptions import Unresolvable

from runtime.isolation import TooCostly, run_isolated

MAX_MESSAGE_CHARS = 400  # of the error the model reads: enough to fix the call, never the whole input
MAX_SCHEMA_COST = 20_000  # subschemas, with every $ref expanded (a schema of 5,000 properties costs ~5,000)
MAX_SCHEMA_DEPTH = 128  # subschemas within subschemas, through $refs too

# Keywords whose subschemas apply to the value itself, and those that apply to a part of it (a property,
# an item): a $ref back to a schema on the way is endless only if no keyword of the second kind is between.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
_DESCENDING_ONE = ("additionalProperties", "items", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems")
_DESCENDING_MAP = ("properties", "patternProperties")


class InvalidSchema(ValueError):
    """The schema is not a JSON Schema the gateway can check arguments against."""


class UnsupportedRegex(ValueError):
    """A regular expression RE2 cannot run (lookaround, backreferences)."""


@lru_cache(maxsize=1024)
def re2_pattern(regex: str) -> Any:
    """A client's regular expression, compiled for RE2 (linear time in the text it is matched against)."""
    try:
        return re2.compile(regex)
    except re2.error as exc:
        raise UnsupportedRegex(f"{regex!r} is not supported (RE2 syntax, no lookaround or backreferences): {exc}") from None


def _pattern(regex: str) -> Any:
    try:
        return re2_pattern(regex)
    except UnsupportedRegex as exc:
        raise InvalidSchema(f"the pattern {exc}") from None


def _pattern_keyword(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if isinstance(instance, str) and not _pattern(pattern).search(instance):
        yield ValidationError(f"{_short(instance, 60)} does not match {pattern!r}")


def _pattern_properties_keyword(validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not isinstance(instance, dict):
        return
    for pattern, subschema in patterns.items():
        compiled = _pattern(pattern)
        for name, value in instance.items():
            if compiled.search(name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


_Validator = validators.extend(Draft202012Validator, {"pattern": _pattern_keyword, "patternProperties": _pattern_properties_keyword})


# RE2 compiles a pattern in time linear in its program, which a bounded repetition multiplies
# (`[a-z]{0,999}` takes about 3 ms): a schema's patterns are counted and measured before any is compiled.
MAX_PATTERNS, MAX_PATTERN_CHARS = 32, 1000


def _pattern_budget(schema: Any) -> set[str]:
    """The schema's distinct patterns; more than the budget, or a longer one, is refused before any compiles."""
    found: set[str] = set()
    _collect_patterns(schema, found)
    if len(found) > MAX_PATTERNS:
        raise InvalidSchema(f"it has more than {MAX_PATTERNS} distinct patterns")
    if any(len(regex) > MAX_PATTERN_CHARS for regex in found):
        raise InvalidSchema(f"a pattern is longer than {MAX_PATTERN_CHARS} characters")
    return found


def _check_patterns(schema: Any) -> None:
    """Compile every pattern now, so that an unsupported one is the client's 400, not a failed call."""
    for regex in _pattern_budget(schema):
        _pattern(regex)


def _collect_patterns(schema: Any, found: set[str]) -> None:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "pattern" and isinstance(value, str):
                found.add(value)
            elif key == "patternProperties" and isinstance(value, dict):
                found.update(value)
            _collect_patterns(value, found)
    elif isinstance(schema, list):
        for value in schema:
            _collect_patterns(value, found)


def _subschemas(schema: dict[str, Any]) -> Iterator[tuple[Any, bool]]:
    """The subschemas a value is checked against, each with whether it applies to a part of the value."""
    for key, value in schema.items():
        if key in _IN_PLACE_ONE or key in _DESCENDING_ONE:
            values = value if isinstance(value, list) else [value]  # `items` may be a list (older drafts)
            yield from ((each, key in _DESCENDING_ONE) for each in values)
        elif key in _IN_PLACE_MANY or key == "prefixItems":
            if isinstance(value, list):
                yield from ((each, key == "prefixItems") for each in value)
        elif key in _DESCENDING_MAP or key == "dependentSchemas":
            if isinstance(value, dict):
                yield from ((each, key != "dependentSchemas") for each in value.values())


def _resolve(root: Any, ref: str) -> Any:
    """The subschema a local `$ref` (`#`, `#/$defs/name`) points to; None for any other reference."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node = root
    for token in ref[2:].split("/"):
        token = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdecimal() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def schema_cost(root: Any) -> int:
    """How many subschemas one value may be checked against, every `$ref` expanded (a schema reached
    twice counts twice); `InvalidSchema` past the bounds, or for a `$ref` loop that never descends."""
    costs: dict[int, int] = {}
    on_path: dict[int, int] = {}  # id of a schema being expanded -> parts descended into above it

    def visit(node: Any, depth: int, descended: int) -> int:
        if not isinstance(node, dict):
            return 1
        key = id(node)
        if key in on_path:
            if on_path[key] == descended:
                raise InvalidSchema("it refers to itself ($ref) without descending into the value, so no value can be checked against it")
            return 0  # recursion into a part of the value: bounded by the value's own depth
        if key in costs:
            return costs[key]
        if depth > MAX_SCHEMA_DEPTH:
            raise InvalidSchema(f"it nests subschemas (through $ref too) more than {MAX_SCHEMA_DEPTH} deep")
        on_path[key] = descended
        total = 1
        reference = node.get("$ref")
        children = list(_subschemas(node))
        if isinstance(reference, str):
            target = _resolve(root, reference)
            if target is not None:
                children.append((target, False))
        for child, descends in children:
            total += visit(child, depth + 1, descended + descends)
            if total > MAX_SCHEMA_COST:
                raise InvalidSchema(
                    f"checking a value against it could take more than {MAX_SCHEMA_COST} subschemas (with each $ref expanded); "
                    "simplify it (fewer nested anyOf/oneOf through $defs)"
                )
        del on_path[key]
        costs[key] = total
        return total

    return visit(root, 0, 0)


@lru_cache(maxsize=256)
def _compiled(canonical: str) -> Any:
    """In a worker process: the schema's validator, its patterns compiled (RE2's compile is linear in a
    pattern's program, but a bounded repetition multiplies that: never on the event loop)."""
    schema = json.loads(canonical)
    try:
        _Validator.check_schema(schema)
    except SchemaError as exc:
        path = "/".join(str(part) for part in exc.path)
        raise InvalidSchema(f"it is not a valid JSON Schema: {_short(exc.message)}" + (f" (at {path})" if path else "")) from None
    except RecursionError:
        raise InvalidSchema(f"it nests subschemas more than {MAX_SCHEMA_DEPTH} deep") from None
    _check_patterns(schema)
    return _Validator(schema)


def checked_schema(schema: dict[str, Any] | None) -> str:
    """A function's parameters as the canonical JSON its calls are checked against (`argument_problem`),
    once the checks that cost no more than its size pass (its cost with every `$ref` expanded, its
    pattern budget); `schema_compiles` does the rest, off the event loop. Else `InvalidSchema`."""
    canonical = json.dumps(schema or {}, sort_keys=True, separators=(",", ":"))
    _bounded(canonical)
    return canonical


@lru_cache(maxsize=256)
def _bounded(canonical: str) -> None:
    schema = json.loads(canonical)
    schema_cost(schema)
    _pattern_budget(schema)


_COMPILED_HERE: OrderedDict[str, None] = OrderedDict()  # canonical schemas a worker compiled: not sent again
_COMPILED_REMEMBERED = 256


async def schema_compiles(canonical: str, timeout_s: float, tenant: str = "") -> None:
    """That the schema is valid JSON Schema whose patterns RE2 runs, checked in a worker process within
    `timeout_s` (its patterns compiled there, never on the event loop); `InvalidSchema` if not."""
    if canonical in _COMPILED_HERE:
        _COMPILED_HERE.move_to_end(canonical)
        return
    try:
        problem = await run_isolated(timeout_s, compile_problem, canonical, tenant=tenant)
    except TooCostly as exc:
        raise InvalidSchema(f"it could not be compiled within the limits ({exc})") from None
    if problem is not None:
        raise InvalidSchema(problem)
    _COMPILED_HERE[canonical] = None
    if len(_COMPILED_HERE) > _COMPILED_REMEMBERED:
        _COMPILED_HERE.popitem(last=False)


def compile_problem(canonical: str) -> str | None:
    """In a worker process: why the schema cannot be compiled, or None."""
    try:
        _compiled(canonical)
    except InvalidSchema as exc:
        return str(exc)
    return None


def argument_problem(canonical: str, arguments: str) -> str | None:
    """In a worker process (isolation.py): why the arguments (JSON text) break the schema, in a sentence
    for the model; None when they fit."""
    try:
        return argument_error(_compiled(canonical), json.loads(arguments))
    except RecursionError:  # a loop of references the request check could not see (anchors, $dynamicRef)
        return "the function's schema refers to itself endlessly, so the arguments cannot be checked"


def json_object(text: str) -> bool:
    """Whether the text is a JSON object: what every grammar of a call's arguments holds it to."""
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


async def json_problem(text: str, canonical: str | None, timeout_s: float, tenant: str = "") -> str | None:
    """Why the model's JSON text (a call's arguments, a final answer) breaks the canonical schema (with none,
    why it is not a JSON object), in words for the model; None when it fits. The schema check runs in a
    worker process, bounded: the client's schema and the model's text decide its cost."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"it is not JSON ({exc})"
    if canonical is None:
        return None if isinstance(value, dict) else "it is not a JSON object"
    try:
        problem: str | None = await run_isolated(timeout_s, argument_problem, canonical, text, tenant=tenant)
        return problem
    except TooCostly as exc:
        return f"it could not be checked against the schema ({exc})"


def argument_error(validator: Any, arguments: Any) -> str | None:
    """Why the arguments break the schema, in a sentence for the model; None when they fit."""
    try:
        error = next(validator.iter_errors(arguments), None)
    except Unresolvable as exc:  # a $ref that points nowhere: the schema's fault, not the model's
        return f"the function's schema cannot be checked ({_short(str(exc))})"
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{_short(error.message)}" + (f" (at {where})" if where else "")


def _short(text: Any, limit: int = MAX_MESSAGE_CHARS) -> str:
    shown = text if isinstance(text, str) else repr(text)
    return shown if len(shown) <= limit else shown[:limit] + "…"
