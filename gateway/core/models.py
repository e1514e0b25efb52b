"""The base of every request model: strict, so "yes" is not a boolean and "5" is not a number, and an
unknown field is refused by name."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
