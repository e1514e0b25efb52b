"""`filters` over files' `attributes`, as OpenAI defines them (openai/types/shared/comparison_filter.py,
compound_filter.py), made into SQL over the attribute rows of the file row `f`: the database narrows
what it ranks, so a filter never leaves a search with fewer results than it could have had.

Each attribute is a row (key, string value or number value, whether boolean): a comparison is an EXISTS
over them, the same SQL in both dialects. `ne` and `nin` hold for a file without the key too.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import Field, field_validator

from ..core.models import StrictModel
from ..storage.vector_store_store import AttributeRow, Attributes

MAX_COMPARISONS = 64  # in one filter, compound filters' included
MAX_LIST = 100  # values of one `in` / `nin`
# Values in one filter, every list's counted: each is a subquery of the search's statement (and two of its
# parameters), so 64 lists of 100 would hold the database for seconds and pass PostgreSQL's parameter limit.
MAX_VALUES = 256
MAX_DEPTH = 8
MAX_ATTRIBUTES, MAX_KEY, MAX_VALUE = 16, 64, 512

Scalar = Union[str, float, bool]


class ComparisonFilter(StrictModel):
    type: Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]
    key: str = Field(min_length=1, max_length=MAX_KEY)
    value: Union[bool, float, str, list[Union[float, str]]]

    @field_validator("value")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        if isinstance(value, list) and len(value) > MAX_LIST:
            raise ValueError(f"a list of at most {MAX_LIST} values")
        return value


class CompoundFilter(StrictModel):
    type: Literal["and", "or"]
    filters: list[Union[ComparisonFilter, "CompoundFilter"]] = Field(min_length=1)


Filter = Union[ComparisonFilter, CompoundFilter]
_ORDER = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


class FilterError(ValueError):
    """A filter this gateway will not run: the message says why."""


def filter_sql(filter_: Filter | None) -> tuple[str, list[Any]]:
    """The filter as an SQL condition over the file row `f`, and its parameters ("" where none)."""
    if filter_ is None:
        return "", []
    params: list[Any] = []
    count = [0, 0]  # comparisons, values
    return _sql(filter_, params, count, 0), params


def _sql(filter_: Filter, params: list[Any], count: list[int], depth: int) -> str:
    if depth > MAX_DEPTH:
        raise FilterError(f"filters nest {MAX_DEPTH} deep at most")
    if isinstance(filter_, CompoundFilter):
        joiner = " AND " if filter_.type == "and" else " OR "
        return "(" + joiner.join(_sql(each, params, count, depth + 1) for each in filter_.filters) + ")"
    count[0] += 1
    if count[0] > MAX_COMPARISONS:
        raise FilterError(f"a filter holds {MAX_COMPARISONS} comparisons at most")
    kind, value = filter_.type, filter_.value
    if kind in ("in", "nin"):
        values = value if isinstance(value, list) else [value]
        count[1] += len(values)
        if count[1] > MAX_VALUES:
            raise FilterError(f"a filter compares with {MAX_VALUES} values at most, every list's counted")
        sql = "(" + " OR ".join(_match(filter_.key, "=", each, params) for each in values) + ")" if values else "0 = 1"
        return f"NOT {sql}" if kind == "nin" else sql
    if isinstance(value, list):
        raise FilterError(f"'{kind}' compares with one value; 'in' and 'nin' take a list")
    if kind in _ORDER:
        if isinstance(value, bool):
            raise FilterError(f"'{kind}' orders numbers and strings, not booleans")
        return _match(filter_.key, _ORDER[kind], value, params)
    sql = _match(filter_.key, "=", value, params)
    return f"NOT {sql}" if kind == "ne" else sql


def _match(key: str, operator: str, value: Scalar, params: list[Any]) -> str:
    """An attribute of the file whose value stands in `operator` to `value`, compared as its own type."""
    compared: str | float
    if isinstance(value, bool):
        condition, compared = "a.is_boolean = 1 AND a.number_value", float(value)
    elif isinstance(value, (int, float)):
        condition, compared = "a.is_boolean = 0 AND a.number_value", float(value)
    else:
        condition, compared = "a.text_value", value
    params += [key, compared]
    return f"EXISTS (SELECT 1 FROM vector_store_attributes a WHERE a.file_seq = f.seq AND a.key = ? AND {condition} {operator} ?)"


def attribute_rows(attributes: Attributes | None, param: str) -> list[AttributeRow]:
    """A file's `attributes`, checked against OpenAI's limits, as rows; a FilterError names what is wrong."""
    attributes = attributes or {}
    if len(attributes) > MAX_ATTRIBUTES:
        raise FilterError(f"{param} holds {MAX_ATTRIBUTES} keys at most")
    rows: list[AttributeRow] = []
    for key, value in attributes.items():
        if not key or len(key) > MAX_KEY:
            raise FilterError(f"{param} keys are 1 to {MAX_KEY} characters")
        if isinstance(value, bool):
            rows.append((key, None, float(value), True))
        elif isinstance(value, (int, float)):
            rows.append((key, None, float(value), False))
        elif isinstance(value, str):
            if len(value) > MAX_VALUE:
                raise FilterError(f"{param}.{key[:64]} is longer than {MAX_VALUE} characters")
            rows.append((key, value, None, False))
        else:
            raise FilterError(f"{param}.{key[:64]} must be a string, a number or a boolean")
    return rows
