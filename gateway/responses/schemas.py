"""Checking a strict function's arguments against its JSON Schema (jsonschema, Draft 2020-12).

Validators are compiled once per distinct schema and kept in a bounded cache: clients send the same
tools with every request. The schema comes from the client and the arguments from the model, so both
are hostile: `pattern` and `patternProperties` run on RE2, whose matching is linear in the text (a
backtracking `(a+)+$` cannot stall the event loop), and `$ref` resolves inside the schema only
(jsonschema never fetches remote references).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Iterator

import re2
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from referencing.exceptions import Unresolvable

MAX_MESSAGE_CHARS = 400  # of the error the model reads: enough to fix the call, never the whole input


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


_Validator = validators.extend(
    Draft202012Validator, {"pattern": _pattern_keyword, "patternProperties": _pattern_properties_keyword}
)


def _check_patterns(schema: Any) -> None:
    """Compile every pattern now, so that an unsupported one is the client's 400, not a failed call."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "pattern" and isinstance(value, str):
                _pattern(value)
            elif key == "patternProperties" and isinstance(value, dict):
                for regex in value:
                    _pattern(regex)
            _check_patterns(value)
    elif isinstance(schema, list):
        for value in schema:
            _check_patterns(value)


@lru_cache(maxsize=256)
def _compiled(canonical: str) -> Any:
    schema = json.loads(canonical)
    try:
        _Validator.check_schema(schema)
    except SchemaError as exc:
        path = "/".join(str(part) for part in exc.path)
        raise InvalidSchema(f"it is not a valid JSON Schema: {_short(exc.message)}" + (f" (at {path})" if path else "")) from None
    _check_patterns(schema)
    return _Validator(schema)


def validator_for(schema: dict[str, Any] | None) -> Any:
    """The compiled validator of a function's parameters; `InvalidSchema` if it cannot be one."""
    return _compiled(json.dumps(schema or {}, sort_keys=True, separators=(",", ":")))


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
    text = text if isinstance(text, str) else repr(text)
    return text if len(text) <= limit else text[:limit] + "…"
