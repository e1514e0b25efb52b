"""Bounds one tenant cannot push past: foreground responses running at once, per tenant and in all, counted
over HTTP, Chat Completions and the WebSocket alike, each cap seen holding on its own."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator

import httpx
import openai
import pytest

from .conftest import MODEL, Gateway, Process
from .test_websocket import until_end

KEYS = [{"key": "alice-key", "tenant": "alice"}, {"key": "mallory-key", "tenant": "mallory"}]


@contextlib.contextmanager
def held(gateway: Gateway, key: str) -> Iterator[None]:
    """A streamed response that runs until the client leaves (the engine stalls), held open meanwhile."""
    body = {"model": MODEL, "input": "[stall]", "stream": True}
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", f"{gateway.url}/v1/responses", json=body, headers={"authorization": f"Bearer {key}"}) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            while "response.in_progress" not in next(lines):
                pass
            yield


def refused(gateway: Gateway, key: str) -> dict[str, Any]:
    answer = httpx.post(f"{gateway.url}/v1/responses", json={"model": MODEL, "input": "hi"}, headers={"authorization": f"Bearer {key}"})
    assert answer.status_code == 429, answer.text
    return answer.json()["error"]


def test_foreground_responses_are_capped_per_tenant_and_in_all(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url, auth={"api_keys": KEYS}, limits={"max_concurrent_per_tenant": 2, "max_concurrent": 3})
    alice, mallory = gateway.client(api_key="alice-key"), gateway.client(api_key="mallory-key")
    for _ in range(3):  # a request refused while it is planned gives its place back
        with pytest.raises(openai.NotFoundError):
            alice.responses.create(model=MODEL, input="hi", previous_response_id="resp_missing")
    with held(gateway, "alice-key"), held(gateway, "alice-key"):
        # Alice's third is refused while the gateway has room: the per-tenant cap alone.
        error = refused(gateway, "alice-key")
        assert error["code"] == "rate_limit_exceeded" and "2 responses running" in error["message"]
        with pytest.raises(openai.RateLimitError):
            alice.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.RateLimitError):
            alice.responses.compact(model=MODEL, input="compact this")
        with alice.responses.connect() as connection:
            connection.response.create(model=MODEL, input="hi")
            (event,) = until_end(connection)
            assert event["type"] == "error" and event["status"] == 429 and event["error"]["code"] == "rate_limit_exceeded"
        # Mallory is not held back by alice's count.
        assert mallory.responses.create(model=MODEL, input="hi").status == "completed"
        with held(gateway, "mallory-key"):
            # The gateway's cap alone: mallory has one running, below her own cap.
            assert "is running 3 responses" in refused(gateway, "mallory-key")["message"]
    # Ended (the clients left), their places are free again.
    deadline = time.monotonic() + 10
    while True:
        answer = httpx.post(f"{gateway.url}/v1/responses", json={"model": MODEL, "input": "hi"}, headers={"authorization": "Bearer alice-key"})
        if answer.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert answer.status_code == 200 and answer.json()["status"] == "completed"
    # A background run is counted by its own cap, not this one.
    with held(gateway, "alice-key"), held(gateway, "alice-key"):
        background = alice.responses.create(model=MODEL, input="hi", background=True)
        assert background.status in ("queued", "in_progress", "completed")
