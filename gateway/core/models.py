"""The base of every request model: strict, so "yes" is not a boolean and "5" is not a number, and an
unknown field is refused by name."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def metadata_limits(value: dict[str, str]) -> dict[str, str]:
    """OpenAI's bounds on `metadata`: 16 keys of up to 64 characters, values of up to 512."""
    if len(value) > 16:
        raise ValueError("at most 16 metadata keys are allowed")
    for key, text in value.items():
        if len(key) > 64 or len(text) > 512:
            raise ValueError("metadata keys are at most 64 characters and values at most 512")
    return value


# `metadata` wherever a request takes it (responses, conversations, vector stores).
Metadata = Annotated[dict[str, str], AfterValidator(metadata_limits)]
