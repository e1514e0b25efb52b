"""Bad input gets a 4xx in OpenAI's error shape that names the field: never a 500, never a hang."""

from __future__ import annotations

import httpx
import pytest


def post(gateway, body, raw: bytes | None = None) -> httpx.Response:
    if raw is not None:
        return httpx.post(gateway.url + "/v1/responses", content=raw, headers={"content-type": "application/json"})
    return httpx.post(gateway.url + "/v1/responses", json=body)


def assert_error(response: httpx.Response, status: int, param: str | None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    assert error["param"] == param
    return error


@pytest.mark.parametrize(
    "body, param",
    [
        ({}, "input"),
        ({"input": 5}, "input"),
        ({"input": "x", "max_output_tokens": -1}, "max_output_tokens"),
        ({"input": "x", "max_output_tokens": "many"}, "max_output_tokens"),
        ({"input": "x", "temperature": 7}, "temperature"),
        ({"input": "x", "stream": "yes"}, "stream"),
        ({"input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
        ({"input": [{"role": "user"}]}, "input[0].content"),
        ({"input": [{"role": "user", "content": [{"type": "input_audio", "text": "x"}]}]}, "input[0].content[0]"),
        ({"input": [{"type": "telepathy"}]}, "input[0]"),
        ({"input": "x", "tools": [{"type": "teleport"}]}, "tools[0]"),
        ({"input": "x", "tools": [{"type": "function"}]}, "tools[0].name"),
        ({"input": "x", "reasoning": {"effort": "extreme"}}, "reasoning.effort"),
        ({"input": "x", "metadata": {"a": 1}}, "metadata.a"),
        ({"input": "x", "instructions": ["no"]}, "instructions"),
        ({"input": [{"type": "function_call_output", "call_id": "call_nope", "output": "1"}]}, "input[0].call_id"),
    ],
)
def test_invalid_fields_name_the_param(gateway, body, param):
    error = assert_error(post(gateway, body), 400, param)
    assert error["type"] == "invalid_request_error"


def test_invalid_json(gateway):
    error = assert_error(post(gateway, None, raw=b"{not json"), 400, None)
    assert error["code"] == "invalid_json"


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"text"', b"null"])
def test_body_not_an_object(gateway, raw):
    assert_error(post(gateway, None, raw=raw), 400, None)


def test_unknown_previous_response_is_404(gateway):
    error = assert_error(post(gateway, {"input": "x", "previous_response_id": "resp_missing"}), 404, "previous_response_id")
    assert "resp_missing" in error["message"]


def test_unknown_routes_and_methods(gateway):
    assert_error(httpx.get(gateway.url + "/v1/nothing"), 404, None)
    assert_error(httpx.put(gateway.url + "/v1/responses"), 405, None)
    assert_error(httpx.get(gateway.url + "/v1/responses/resp_nope"), 404, "response_id")
    assert_error(httpx.get(gateway.url + "/v1/responses/resp_nope/input_items"), 404, "response_id")


def test_bad_input_items_query(gateway):
    created = httpx.post(gateway.url + "/v1/responses", json={"input": "x"}).json()
    url = f"{gateway.url}/v1/responses/{created['id']}/input_items"
    assert_error(httpx.get(url, params={"limit": "lots"}), 400, "limit")
    assert_error(httpx.get(url, params={"order": "sideways"}), 400, "order")
