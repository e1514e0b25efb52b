"""Reading a JSON request body into a validated model, with OpenAI-shaped 400s."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from .errors import bad_request, from_validation_error

ModelT = TypeVar("ModelT", bound=BaseModel)


async def read_json_object(request: Request) -> dict[str, Any]:
    body = await request.body()
    try:
        data = json.loads(body)
    except ValueError:
        raise bad_request("We could not parse the JSON body of your request.", code="invalid_json") from None
    if not isinstance(data, dict):
        raise bad_request("The request body must be a JSON object.", code="invalid_type")
    return data


async def parse_body(request: Request, model: type[ModelT]) -> ModelT:
    data = await read_json_object(request)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, data) from None
