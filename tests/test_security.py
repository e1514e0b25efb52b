"""Attacks on the gateway's newer surfaces, each as an attacker would send it: work whose cost the input
decides (a PDF, a JSON Schema) bounded in a worker process while other tenants go on; integers that
`str.isdigit()` let through; counts and quotas that hold; conversations that cannot grow without bound."""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time
import zlib
from typing import Any, Iterator

import httpx
import openai
import pytest

from .conftest import MODEL, Gateway, Process, gateway_config, sandbox_section

KEYS = [{"key": "alice-key", "tenant": "alice"}, {"key": "mallory-key", "tenant": "mallory"}]
PDF_TIMEOUT_S = 3


def hostile_pdf(pages: int = 1000, stream_bytes: int = 2 * 1024 * 1024) -> bytes:
    """A 160 KB PDF whose pages all draw one 2 MB content stream: ~3 s of pypdf's extraction a page."""
    drawing = b"BT /F1 12 Tf 10 10 Td (x) Tj ET\n"
    content = zlib.compress(drawing * (stream_bytes // len(drawing)), 9)
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (5 + n) for n in range(pages)) + b"] /Count %d >>" % pages,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content) + content + b"\nendstream",
        *[page] * pages,
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1) + b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def nested_any_of(depth: int = 40) -> dict[str, Any]:
    """3 KB of schema, 2^depth branches: each definition is anyOf two references to the next."""
    defs = {f"d{n}": {"anyOf": [{"$ref": f"#/$defs/d{n + 1}"}, {"$ref": f"#/$defs/d{n + 1}"}]} for n in range(depth)}
    defs[f"d{depth}"] = {"type": "integer"}
    return {"type": "object", "properties": {"v": {"$ref": "#/$defs/d0"}}, "required": ["v"], "$defs": defs}


# Passes every static bound (its recursion descends into the value), yet a value nested 40 deep makes
# jsonschema try both branches at every level: 2^40 checks, only a time limit can stop it.
BRANCHING_TREE = {
    "$ref": "#/$defs/node",
    "$defs": {
        "node": {
            "anyOf": [
                {"type": "object", "properties": {"a": {"$ref": "#/$defs/node"}}, "required": ["a"]},
                {"type": "object", "properties": {"a": {"$ref": "#/$defs/node"}}, "required": ["a"], "minProperties": 1},
            ]
        }
    },
}


def function(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "name": name, "description": "A function.", "parameters": parameters, "strict": True}


@pytest.fixture(scope="module")
def guarded(emulator: Process, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("guarded")
    files = {
        "pdf_timeout_s": PDF_TIMEOUT_S, "max_file_bytes": 1_000_000, "tenant_quota_bytes": 2_000_000, "max_files_per_tenant": 5,
        "max_containers_per_tenant": 3, "max_input_file_chars": 100_000,
    }  # fmt: skip
    config = gateway_config(
        emulator.url, tmp, auth={"api_keys": KEYS}, files=files, isolation={"schema_timeout_s": 1},
        conversations={"max_items": 10}, loop={"max_background_per_tenant": 2},
        sandbox=sandbox_section("local", f"guarded-{os.getpid()}", pool_size=0),  # for containers
    )  # fmt: skip
    process = Gateway(config, tmp).start()
    yield process
    process.stop()


def client(gateway: Gateway, key: str, **options: Any) -> openai.OpenAI:
    return gateway.client(api_key=key, **options)


# -- 1. work whose cost the input decides -----------------------------------------------------------------


def test_hostile_work_never_stalls_another_tenant(guarded: Gateway) -> None:
    """Two hostile PDFs and a schema whose check explodes, from mallory; alice's stored responses (the
    default: they go through the CPU lane) keep answering within a second all along."""
    pdf = base64.b64encode(hostile_pdf()).decode()
    mallory = client(guarded, "mallory-key", timeout=60)
    outcomes: dict[str, Any] = {}

    def send_pdf(slot: str) -> None:
        part = {"type": "input_file", "filename": "report.pdf", "file_data": f"data:application/pdf;base64,{pdf}"}
        started = time.monotonic()
        try:
            mallory.responses.create(model=MODEL, input=[{"role": "user", "content": [part]}])
        except openai.BadRequestError as exc:
            outcomes[slot] = (exc.body, time.monotonic() - started)

    def call_branching() -> None:
        arguments = json.dumps(json.loads('{"a":' * 40 + "1" + "}" * 40))
        response = mallory.responses.create(
            model=MODEL, input=f"[call functions.walk {arguments}] [misbehave]", tools=[function("walk", BRANCHING_TREE)]
        )
        outcomes["schema"] = response

    attacks = [threading.Thread(target=send_pdf, args=(slot,)) for slot in ("pdf1", "pdf2")] + [threading.Thread(target=call_branching)]
    for attack in attacks:
        attack.start()
    alice = client(guarded, "alice-key", timeout=60, max_retries=0)
    answered_meanwhile = 0
    while any(attack.is_alive() for attack in attacks):
        alice.responses.create(model=MODEL, input="hi")
        answered_meanwhile += any(attack.is_alive() for attack in attacks)
    for attack in attacks:
        attack.join()
    # Answered again and again while mallory's work ran. Had his work gone first, each job until its time
    # limit, she would have been answered once it had all run. (How fast: bench/containment.py.)
    assert answered_meanwhile >= 2, answered_meanwhile
    for slot in ("pdf1", "pdf2"):
        body, took = outcomes[slot]
        assert body["code"] == "invalid_value" and f"took longer than {PDF_TIMEOUT_S} s" in body["message"], body
        assert took < PDF_TIMEOUT_S * 10  # stopped at its limit: read whole, its thousand pages take ~3 s each
    response = outcomes["schema"]
    call = next(item for item in response.output if item.type == "function_call")
    assert call.status == "incomplete"
    assert "could not be checked against the schema (it took longer than 1 s)" in response.output_text


@pytest.mark.parametrize(
    "parameters, why",
    [
        (nested_any_of(), "could take more than 20000 subschemas"),
        ({"$ref": "#"}, "refers to itself"),
        ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}, "refers to itself"),
    ],
)
def test_schemas_that_cannot_be_checked_are_refused_before_they_run(guarded: Gateway, parameters: dict[str, Any], why: str) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client(guarded, "alice-key").responses.create(model=MODEL, input="x", tools=[function("f", parameters)])
    assert refused.value.body["param"] == "tools[0].parameters" and why in refused.value.body["message"]


def test_a_recursive_schema_that_descends_is_checked(guarded: Gateway) -> None:
    tree = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "child": {"$ref": "#"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    good = json.dumps({"name": "root", "child": {"name": "leaf", "child": {"name": "twig"}}})
    bad = json.dumps({"name": "root", "child": {"name": "leaf", "child": {"name": 7}}})
    alice = client(guarded, "alice-key")
    response = alice.responses.create(model=MODEL, input=f"[call functions.tree {good}]", tools=[function("tree", tree)])
    assert response.output[-1].type == "function_call" and response.output[-1].status == "completed"
    response = alice.responses.create(model=MODEL, input=f"[call functions.tree {bad}] [misbehave]", tools=[function("tree", tree)])
    assert "is not of type 'string'" in response.output_text


def test_an_input_file_too_long_is_refused_unread(guarded: Gateway) -> None:
    alice = client(guarded, "alice-key")
    upload = alice.files.create(file=("big.csv", b"a,b\n" * 200_000), purpose="user_data")  # 800 KB > 4 x 100,000
    try:
        with pytest.raises(openai.BadRequestError) as refused:
            alice.responses.create(model=MODEL, input=[{"role": "user", "content": [{"type": "input_file", "file_id": upload.id}]}])
        assert refused.value.code == "file_too_large" and "longer than 100000 characters" in refused.value.body["message"]
    finally:
        alice.files.delete(upload.id)


# -- 3. counts and quotas ---------------------------------------------------------------------------------


def test_counts_are_capped_per_tenant(guarded: Gateway) -> None:
    alice, mallory = client(guarded, "alice-key"), client(guarded, "mallory-key")
    uploads = [mallory.files.create(file=(f"{n}.txt", b"x"), purpose="user_data") for n in range(5)]
    with pytest.raises(openai.BadRequestError) as refused:
        mallory.files.create(file=("6.txt", b"x"), purpose="user_data")
    assert refused.value.code == "too_many_files"
    alice.files.delete(alice.files.create(file=("mine.txt", b"x"), purpose="user_data").id)  # another tenant's count
    containers = [mallory.containers.create(name=f"c{n}") for n in range(3)]
    with pytest.raises(openai.BadRequestError) as refused:
        mallory.containers.create(name="c4")
    assert refused.value.code == "too_many_containers"
    mallory.containers.delete(containers[0].id)
    containers[0] = mallory.containers.create(name="again")  # a deleted one no longer counts
    running = [mallory.responses.create(model=MODEL, input="[stall]", background=True) for _ in range(2)]
    try:
        with pytest.raises(openai.RateLimitError) as limited:
            mallory.with_options(max_retries=0).responses.create(model=MODEL, input="[stall]", background=True)
        assert limited.value.code == "too_many_background_responses"
        assert alice.responses.create(model=MODEL, input="hi", background=True).status in ("queued", "in_progress")
    finally:
        for response in running:
            mallory.responses.cancel(response.id)
    for upload in uploads:
        mallory.files.delete(upload.id)
    for container in containers:
        mallory.containers.delete(container.id)


def _partial_upload(gateway: Gateway, key: str, size: int, sent: int) -> socket.socket:
    """An upload of a `size`-byte file that has sent `sent` bytes of it and holds the connection open."""
    head = b'--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n'
    head += b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\n'
    tail = b"\r\n--b--\r\n"
    connection = socket.create_connection(("127.0.0.1", gateway.port))
    request = (
        f"POST /v1/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {len(head) + size + len(tail)}\r\n\r\n"
    ).encode()
    connection.sendall(request + head + b"x" * sent)
    return connection


def test_uploads_in_flight_count_toward_the_quota(guarded: Gateway) -> None:
    """Three uploads held open, 800 KB each so far, against a 2 MB quota: the third is refused while it
    streams, before it is complete."""
    held = [_partial_upload(guarded, "mallory-key", 900_000, 800_000) for _ in range(2)]
    time.sleep(0.5)
    third = _partial_upload(guarded, "mallory-key", 900_000, 800_000)
    try:
        third.settimeout(5)
        answer = b""
        while b"storage_quota_exceeded" not in answer and (chunk := third.recv(65536)):
            answer += chunk  # the head and the body may come in two reads
        assert answer.startswith(b"HTTP/1.1 413") and b"storage_quota_exceeded" in answer, answer[:300]
    finally:
        for connection in held + [third]:
            connection.close()


# -- 4. conversations -------------------------------------------------------------------------------------


def test_a_conversation_is_capped_in_items(guarded: Gateway) -> None:
    alice = client(guarded, "alice-key")
    conversation = alice.conversations.create(items=[{"role": "user", "content": f"note {n}"} for n in range(8)])
    alice.conversations.items.create(conversation.id, items=[{"role": "user", "content": "ninth"}])
    with pytest.raises(openai.BadRequestError) as refused:
        alice.conversations.items.create(conversation.id, items=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    assert refused.value.code == "conversation_too_long"
    alice.responses.create(model=MODEL, input="hi", conversation=conversation.id)  # 9 + the input: at the cap
    with pytest.raises(openai.BadRequestError) as refused:
        alice.responses.create(model=MODEL, input="hi", conversation=conversation.id)
    assert refused.value.code == "conversation_too_long" and refused.value.param == "conversation"


# -- 8. integers ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["²", "1" * 5000, "9" * 20, "-1", " 1", "0x10"])
def test_integer_parameters_are_integers_within_bounds(guarded: Gateway, value: str) -> None:
    headers = {"authorization": "Bearer alice-key"}
    stored = client(guarded, "alice-key").responses.create(model=MODEL, input="hi", background=True)
    answer = httpx.get(f"{guarded.url}/v1/responses/{stored.id}", params={"stream": "true", "starting_after": value}, headers=headers)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "starting_after", answer.text
    answer = httpx.get(f"{guarded.url}/v1/files", params={"limit": value}, headers=headers)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "limit", answer.text
    form = {"purpose": "user_data", "expires_after[anchor]": "created_at", "expires_after[seconds]": value}
    answer = httpx.post(f"{guarded.url}/v1/files", data=form, files={"file": ("a.txt", b"x")}, headers=headers)
    assert answer.status_code == 400 and answer.json()["error"]["param"] in ("expires_after.seconds", "expires_after[seconds]"), answer.text


def test_a_multipart_boundary_too_long_is_a_400(guarded: Gateway) -> None:
    boundary = "b" * 300
    body = f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n--{boundary}--\r\n'
    headers = {"authorization": "Bearer alice-key", "content-type": f"multipart/form-data; boundary={boundary}"}
    answer = httpx.post(f"{guarded.url}/v1/files", content=body.encode(), headers=headers)
    assert answer.status_code == 400 and "malformed" in answer.json()["error"]["message"], answer.text
