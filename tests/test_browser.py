"""The browser tool end to end: web_search → gpt-oss's browser namespace → search, open, find against a
real local web site and a real MCP search server (and the official mcp-server-fetch) → web_search_call
items, and citations as url_citation annotations, through the openai SDK."""

from __future__ import annotations

import json
import re
import sys
import time
import tracemalloc
from typing import Any, Iterator

import httpx
import pytest

from connectors.browser.decoding import BoundedDecoder, TooLarge

from .conftest import ROOT, Gateway, Process, emulator_stats, free_port
from .stream_checker import check_response_stream

SEARCH = '[[browser search {"query": "zebra stripes"}]]'
OPEN_FIRST = '[[browser open {"id": 0}]]'
FIND = '[[browser find {"pattern": "stripes"}]]'


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    tmp = tmp_path_factory.mktemp("site")
    port = free_port()
    process = Process([sys.executable, "-m", "tests.web_site", "--port", str(port)], port, "/health", tmp / "site.log").start()
    yield process
    process.stop()


def search_server(site: Process) -> dict[str, Any]:
    command = [sys.executable, "-m", "tests.search_server"]
    return {"label": "websearch", "transport": "stdio", "command": command, "args": ["--site", site.url], "cwd": str(ROOT)}


def browser_config(**overrides: Any) -> dict[str, Any]:
    config = {
        "search": {"type": "mcp", "server": "websearch", "tool": "search", "count_argument": "max_results"},
        "allow_networks": ["127.0.0.1/32"],  # the test site; 127.0.0.2 stays refused
        "max_page_bytes": 200_000,
        "page_timeout_s": 2,
    }
    return config | overrides


@pytest.fixture(scope="module")
def browsing(emulator: Process, site: Process, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    from .conftest import gateway_config

    tmp = tmp_path_factory.mktemp("browsing")
    config = gateway_config(emulator.url, tmp, tool_servers=[search_server(site)], browser=browser_config())
    gateway = Gateway(config, tmp).start()
    yield gateway
    gateway.stop()


def stream_events(gateway: Gateway, **body: Any) -> list[dict[str, Any]]:
    events = []
    with gateway.client().responses.create(model="openai/gpt-oss-20b", stream=True, **body) as stream:
        for event in stream:
            events.append(event.model_dump(mode="json", exclude_unset=True))
    return events


def test_search_open_find_and_a_cited_answer_streamed(browsing: Gateway, site: Process, emulator: Process) -> None:
    answer = "Each zebra has unique stripes【1†L2-L3】, and stripes may deter flies【2†L1】.【0†L0】"
    body = {
        "input": f"Tell me about zebra stripes. {SEARCH}{OPEN_FIRST}{FIND}[[answer {answer}]]",
        "tools": [{"type": "web_search", "search_context_size": "low"}],
    }
    events = stream_events(browsing, **body, include=["web_search_call.action.sources"])
    response = check_response_stream(events)
    zebra = site.url + "/articles/zebra"
    calls = [item for item in response.output if item.type == "web_search_call"]
    assert [call.status for call in calls] == ["completed"] * 3
    search, opened, found = (call.action.model_dump(exclude_none=True) for call in calls)
    assert search == {
        "type": "search",
        "query": "zebra stripes",
        "sources": [{"type": "url", "url": zebra}, {"type": "url", "url": site.url + "/articles/lion"}],
    }
    assert opened == {"type": "open_page", "url": zebra}
    assert found == {"type": "find_in_page", "url": zebra, "pattern": "stripes"}
    # Each call streamed live: added, in_progress, searching (once written), completed, done.
    kinds = [e["type"] for e in events if e.get("item_id") == calls[0].id or e.get("item", {}).get("id") == calls[0].id]
    assert kinds == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
    ]

    # The answer: citations became links, each spanned by a url_citation announced after its text.
    message = response.output[-1]
    text = message.content[0].text
    assert "【" not in text and "†" not in text
    annotations = [a.model_dump() for a in message.content[0].annotations]
    assert [a["url"] for a in annotations] == [zebra, zebra, zebra]
    assert annotations[0]["title"] == "Zebras of the Serengeti"
    for annotation in annotations:
        assert text[annotation["start_index"] : annotation["end_index"]] == f"([127.0.0.1]({zebra}))"
    assert text.startswith(f"Each zebra has unique stripes ([127.0.0.1]({zebra})), and stripes may deter flies ([127.0.0.1]({zebra})).")
    announced = [e["annotation"] for e in events if e["type"] == "response.output_text.annotation.added"]
    assert announced == annotations

    # The SDK's stream helper accumulates the same answer, annotations included.
    with browsing.client().responses.stream(model="openai/gpt-oss-20b", input=body["input"], tools=body["tools"]) as stream:
        deltas = "".join(event.delta for event in stream if event.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert final.output_text == deltas == text
    assert [a.model_dump() for a in final.output[-1].content[0].annotations] == annotations

    # What the model read: the browser namespace as gpt-oss was trained, and numbered views with cursors.
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "namespace browser {" in prompt and "Cite information from the tool using the following format" in prompt
    assert "[0] Search results for `zebra stripes`" in prompt
    assert "L0: * 【0†Zebras of the Serengeti†127.0.0.1】" in prompt
    assert f"[1] Zebras of the Serengeti ({zebra})\n**viewing lines [0 - " in prompt
    assert "【0†our lion article】" in prompt and "【1†the stripes project†example.org】" in prompt
    assert "[2] Find results for text: `stripes` in `Zebras of the Serengeti`" in prompt
    assert "# 【0†match at L" in prompt


def test_cited_answer_without_streaming_and_in_a_continuation(browsing: Gateway, site: Process) -> None:
    client = browsing.client()
    first = client.responses.create(
        model="openai/gpt-oss-20b",
        input=f"Search. {SEARCH}[[answer Lions hunt zebras【0†L3-L4】.]]",
        tools=[{"type": "web_search"}],
    )
    assert first.status == "completed"
    lion = site.url + "/articles/lion"
    # The search results page: a citation of a result's line points to that result.
    assert first.output_text == f"Lions hunt zebras ([127.0.0.1]({lion}))."
    (annotation,) = first.output[-1].content[0].annotations
    assert (annotation.type, annotation.url, annotation.title) == ("url_citation", lion, "Lions and their prides")
    search = next(item for item in first.output if item.type == "web_search_call")
    assert search.action.sources is None  # not included unless asked for

    # A later response of the conversation cites the earlier view, and opens one of its links.
    second = client.responses.create(
        model="openai/gpt-oss-20b",
        previous_response_id=first.id,
        input='[[browser open {"cursor": 0, "id": 1}]][[answer As said【0†L0】 and read【1†L1】.]]',
        tools=[{"type": "web_search"}],
    )
    assert second.status == "completed", second.error
    opened = next(item for item in second.output if item.type == "web_search_call")
    assert opened.action.url == lion
    urls = [a.url for a in second.output[-1].content[0].annotations]
    assert urls == [site.url + "/articles/zebra", lion]


def test_an_answer_cites_a_page_and_a_file(browsing: Gateway, site: Process) -> None:
    """web_search and file_search together: each citation resolves by its own tool."""
    import io

    client = browsing.client()
    file_id = client.files.create(file=("notes.md", io.BytesIO(b"Zebras sleep standing up.")), purpose="assistants").id
    store = client.vector_stores.create(name="notes", file_ids=[file_id])
    deadline = time.monotonic() + 30
    while client.vector_stores.retrieve(store.id).file_counts.in_progress:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    files = '[[call file_search.msearch {"queries": ["zebras sleep"]}]]'
    response = client.responses.create(
        model="openai/gpt-oss-20b",
        input=f"{SEARCH}{files}[[answer Stripes are unique【0†L2-L3】 and zebras sleep standing.【0†notes.md】]]",
        tools=[{"type": "web_search"}, {"type": "file_search", "vector_store_ids": [store.id]}],
    )
    annotations = response.output[-1].content[0].annotations  # type: ignore[union-attr]
    assert [annotation.type for annotation in annotations] == ["url_citation", "file_citation"]
    assert annotations[1].file_id == file_id  # type: ignore[union-attr]


def test_chat_completions_get_the_same_text_and_annotations(browsing: Gateway, site: Process) -> None:
    completion = browsing.client().chat.completions.create(
        model="openai/gpt-oss-20b",
        messages=[{"role": "user", "content": f"{SEARCH}[[answer Stripes【0†L0】.]]"}],
        web_search_options={"search_context_size": "medium"},
    )
    message = completion.choices[0].message
    zebra = site.url + "/articles/zebra"
    assert message.content == f"Stripes ([127.0.0.1]({zebra}))."
    (annotation,) = message.annotations
    citation = annotation.url_citation
    assert message.content[citation.start_index : citation.end_index] == f"([127.0.0.1]({zebra}))"
    assert citation.url == zebra and citation.title == "Zebras of the Serengeti"

    # With a preamble before the answer, the content joins both messages and the indices count from its start.
    asked = [{"role": "user", "content": f"{SEARCH}[[answer Stripes【0†L0】.]] [preamble]"}]
    whole = browsing.client().chat.completions.create(model="openai/gpt-oss-20b", messages=asked, web_search_options={}).choices[0].message
    assert whole.content == f"Here is what I found.Stripes ([127.0.0.1]({zebra}))."
    citation = whole.annotations[0].url_citation
    assert whole.content[citation.start_index : citation.end_index] == f"([127.0.0.1]({zebra}))"
    chunks = list(browsing.client().chat.completions.create(model="openai/gpt-oss-20b", messages=asked, web_search_options={}, stream=True))
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert streamed == whole.content
    announced = [a for chunk in chunks if chunk.choices for a in (chunk.choices[0].delta.model_extra or {}).get("annotations", [])]
    assert announced == [a.model_dump() for a in whole.annotations]


def test_tool_choice_web_search_forces_a_search(browsing: Gateway, site: Process) -> None:
    response = browsing.client().responses.create(
        model="openai/gpt-oss-20b",
        input='Hello [args {"query": "lion"}]',
        tools=[{"type": "web_search_preview"}],
        tool_choice={"type": "web_search_preview"},
        include=["web_search_call.action.sources"],
    )
    call = response.output[0]
    assert call.type == "web_search_call" and call.status == "completed"
    assert call.action.query == "lion"
    assert [source.url for source in call.action.sources] == [site.url + "/articles/zebra", site.url + "/articles/lion"]
    assert response.tool_choice.type == "web_search_preview"


@pytest.mark.parametrize(
    "path, error",
    [
        ("/slow?s=10", "did not load within 2 s"),
        ("/big", "larger than the browser's limit of 200000 bytes"),
        ("/image.png", "not text or HTML (it is image/png)"),
        ("/away", "`127.0.0.2` is a private, loopback or otherwise non-public address"),
        ("/missing", "the server answered HTTP 404"),
        # 1 GiB of zeros in two gzip layers: refused at the limit while it unpacks, never unpacked whole.
        ("/bomb", "larger than the browser's limit of 200000 bytes"),
        ("/unparsable", "could not be fetched (InvalidURL"),  # a redirect to `http:127.0.0.1:1/x`
    ],
)
def test_pages_that_cannot_be_read_fail_the_call_and_the_model_is_told(browsing: Gateway, site: Process, path: str, error: str) -> None:
    arguments = json.dumps({"id": site.url + path})
    events = stream_events(browsing, input=f"[[browser open {arguments}]]", tools=[{"type": "web_search"}])
    response = check_response_stream(events)
    assert response.status == "completed"
    call = response.output[1]
    assert call.type == "web_search_call" and call.status == "failed"
    assert call.action.type == "open_page" and call.action.url == site.url + path
    assert error in response.output_text  # the scripted model repeats what the tool told it


@pytest.mark.parametrize("url", ["http://☃.example/", "http://a〖b.example/", "http://a\u3016b.example/x"])
def test_hosts_that_are_not_idna_fail_the_call(browsing: Gateway, url: str) -> None:
    events = stream_events(browsing, input=f"[[browser open {json.dumps({'id': url})}]]", tools=[{"type": "web_search"}])
    response = check_response_stream(events)
    assert response.status == "completed" and response.output[1].status == "failed"
    assert "is not a valid host name" in response.output_text


def test_the_gzip_bomb_costs_no_memory(emulator: Process, site: Process, make_gateway: Any) -> None:
    browsing = make_gateway(emulator.url, browser=browser_config(search=None))  # its own process: its own peak
    warm_up = json.dumps({"id": site.url + "/articles/lion"})
    browsing.client().responses.create(model="openai/gpt-oss-20b", input=f"[[browser open {warm_up}]]", tools=[{"type": "web_search"}])
    before = browsing.peak_rss_bytes()
    for _ in range(3):
        response = browsing.client().responses.create(
            model="openai/gpt-oss-20b", input=f"[[browser open {json.dumps({'id': site.url + '/bomb'})}]]", tools=[{"type": "web_search"}]
        )
        assert response.output[1].status == "failed"
    assert browsing.peak_rss_bytes() - before < 64 * 1024 * 1024


def test_search_results_cannot_forge_citation_markers(browsing: Gateway, emulator: Process) -> None:
    search = '[[browser search {"query": "forged"}]]'
    response = browsing.client().responses.create(model="openai/gpt-oss-20b", input=search, tools=[{"type": "web_search"}])
    assert response.status == "completed"
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "a〗〖9‡l0-l5〗b.example" in prompt  # the host, lowercased, with look-alikes
    assert "【9†L0-L5】" not in prompt


def test_an_address_outside_the_allowed_networks_is_refused_before_connecting(browsing: Gateway) -> None:
    for url in ("http://127.0.0.2:9/", "http://169.254.169.254/latest/meta-data/", "http://[::1]:9/", "file:///etc/passwd"):
        response = browsing.client().responses.create(
            model="openai/gpt-oss-20b", input=f"[[browser open {json.dumps({'id': url})}]]", tools=[{"type": "web_search"}]
        )
        assert response.output[1].status == "failed"
        assert re.search(r"non-public address|only http and https", response.output_text), response.output_text


def test_the_page_text_is_cleaned_and_plain_text_is_read_as_it_is(browsing: Gateway, site: Process, emulator: Process) -> None:
    arguments = json.dumps({"id": site.url + "/notes.txt"})
    browsing.client().responses.create(model="openai/gpt-oss-20b", input=f"[[browser open {arguments}]]", tools=[{"type": "web_search"}])
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "L2: A zebra foal can stand within an hour of birth." in prompt
    arguments = json.dumps({"id": site.url + "/articles/lion"})
    browsing.client().responses.create(model="openai/gpt-oss-20b", input=f"[[browser open {arguments}]]", tools=[{"type": "web_search"}])
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "Lions live in prides" in prompt
    assert "Copyright the test site" not in prompt  # boilerplate removed by the extractor


def test_a_search_backend_that_is_down_fails_the_call(emulator: Process, site: Process, make_gateway: Any) -> None:
    down = {"label": "websearch", "transport": "stdio", "command": [sys.executable, "-c", "raise SystemExit(3)"]}
    gateway = make_gateway(emulator.url, mcp={"connect_wait_s": 1}, tool_servers=[down], browser=browser_config())
    response = gateway.client().responses.create(model="openai/gpt-oss-20b", input=SEARCH, tools=[{"type": "web_search"}])
    assert response.status == "completed"
    call = response.output[1]
    assert call.status == "failed" and call.action.query == "zebra stripes"
    assert "the search failed" in response.output_text or "unavailable" in response.output_text


def test_pages_through_the_official_mcp_fetch_server(emulator: Process, site: Process, make_gateway: Any) -> None:
    # Its own guard is opened for the test site's loopback address (the gateway's guard still applies); with
    # no Node on its PATH, its HTML extractor is the pure-Python one (Node's would be fetched from npm).
    command = [sys.executable, "-m", "mcp_server_fetch", "--ignore-robots-txt", "--allow-private-ips"]
    fetch = {"label": "fetch", "transport": "stdio", "command": command, "env": {"PATH": "/nonexistent"}}
    gateway = make_gateway(emulator.url, tool_servers=[search_server(site), fetch], browser=browser_config(fetch={"type": "mcp", "server": "fetch"}))
    client = gateway.client()
    response = client.responses.create(
        model="openai/gpt-oss-20b", input=f"{SEARCH}{OPEN_FIRST}[[answer Stripes【1†L0】.]]", tools=[{"type": "web_search"}]
    )
    assert response.status == "completed", response.error
    assert [item.status for item in response.output if item.type == "web_search_call"] == ["completed", "completed"], response.output_text
    assert response.output[-1].content[0].annotations[0].url == site.url + "/articles/zebra"
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "Every zebra has its own pattern of black and white stripes" in prompt
    # The guard applies to the fetch server's URLs as well.
    blocked = client.responses.create(
        model="openai/gpt-oss-20b", input=f"[[browser open {json.dumps({'id': 'http://127.0.0.2:9/'})}]]", tools=[{"type": "web_search"}]
    )
    assert blocked.output[1].status == "failed" and "non-public address" in blocked.output_text


def test_web_search_is_refused_by_name_without_a_browser(gateway: Gateway) -> None:
    response = httpx.post(gateway.url + "/v1/responses", json={"model": "openai/gpt-oss-20b", "input": "hi", "tools": [{"type": "web_search"}]})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "tools[0]"


def test_allowed_domains_limit_results_and_pages(browsing: Gateway, site: Process) -> None:
    response = browsing.client().responses.create(
        model="openai/gpt-oss-20b",
        input=f"{SEARCH}[[browser open {json.dumps({'id': site.url + '/articles/zebra'})}]]",
        tools=[{"type": "web_search", "filters": {"allowed_domains": ["example.org"]}}],
        include=["web_search_call.action.sources"],
    )
    search, opened = (item for item in response.output if item.type == "web_search_call")
    assert search.action.sources == []
    assert opened.status == "failed"
    assert "outside the domains" in response.output_text


def test_citations_rewrite_the_same_however_the_text_is_split() -> None:
    """Streamed in pieces of any size, the text and annotations are those of the whole answer; brackets
    that start no citation, and citations of views that do not exist, pass through as written."""
    import random

    from gateway.responses.events.citations import LINES, CitationRewriter, Cited, FileCitation, UrlCitation

    pages = {0: ("https://a.example/x", "A"), 1: ("https://b.example/y", "B")}

    def resolve(cursor: int, locator: str) -> Cited | None:
        if locator == "notes.md" and cursor == 5:  # a file_search result
            return FileCitation("file_1", "notes.md")
        return UrlCitation(*pages[cursor]) if cursor in pages and LINES.fullmatch(locator) else None

    answer = "One【0†L1-L2】two 【1†L3】.【9†L1】 【note】 a【0†x】 【0†L1" + "【" * 3 + "end【1†L4-L5】 filed.【5†notes.md】 Done"

    def rewrite(pieces: list[str]) -> tuple[str, list[dict[str, Any]]]:
        rewriter = CitationRewriter(resolve)
        out = [p for piece in pieces for p in rewriter.feed(piece)] + rewriter.flush()
        return "".join(p.text for p in out), [p.annotation for p in out if p.annotation]

    whole_text, whole_annotations = rewrite([answer])
    assert whole_text == (
        "One ([a.example](https://a.example/x))two ([b.example](https://b.example/y)).【9†L1】 【note】 a【0†x】 【0†L1【【【"
        "end ([b.example](https://b.example/y)) filed. Done"
    )
    links = [annotation for annotation in whole_annotations if annotation["type"] == "url_citation"]
    assert [whole_text[a["start_index"] : a["end_index"]] for a in links] == [
        "([a.example](https://a.example/x))",
        "([b.example](https://b.example/y))",
        "([b.example](https://b.example/y))",
    ]
    # A file's citation leaves the text, and marks where it stood.
    assert whole_annotations[-1] == {"type": "file_citation", "file_id": "file_1", "filename": "notes.md", "index": whole_text.index(" Done")}
    rng = random.Random(7)
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(answer)), rng.randint(1, 12)))
        pieces = [answer[a:b] for a, b in zip([0, *cuts], [*cuts, len(answer)])]
        assert rewrite(pieces) == (whole_text, whole_annotations)


def test_a_response_sent_back_as_input_is_read_again(browsing: Gateway, emulator: Process) -> None:
    """Clients that keep no server state replay the output items, web_search_call and annotated messages
    included: accepted as they came; the model reads its earlier answer with its links."""
    client = browsing.client()
    first = client.responses.create(
        model="openai/gpt-oss-20b", input=f"{SEARCH}[[answer Stripes【0†L0】.]]", tools=[{"type": "web_search"}], store=False
    )
    replay = [{"role": "user", "content": f"{SEARCH}[[answer Stripes【0†L0】.]]"}]
    replay += [item.model_dump(exclude_none=True) for item in first.output]
    replay.append({"role": "user", "content": "And lions?"})
    second = client.responses.create(model="openai/gpt-oss-20b", input=replay, tools=[{"type": "web_search"}])
    assert second.status == "completed", second.error
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "<|channel|>final<|message|>Stripes ([127.0.0.1](" in prompt and "And lions?" in prompt
    listed = client.responses.input_items.list(second.id, order="asc")  # the replayed call is an input item like any other
    searched = next(item for item in first.output if item.type == "web_search_call")
    assert [item.id for item in listed.data if item.type == "web_search_call"] == [searched.id]


def test_a_cancelled_search_is_closed_with_the_response(browsing: Gateway, site: Process) -> None:
    """A browser call still running when its response is cancelled ends with the response: its item is done,
    never left `searching`."""
    import time

    client = browsing.client()
    arguments = json.dumps({"id": site.url + "/slow?s=10"})
    response = client.responses.create(
        model="openai/gpt-oss-20b", input=f"[[browser open {arguments}]]", tools=[{"type": "web_search"}], background=True
    )
    deadline = time.monotonic() + 10
    while not any(item.type == "web_search_call" and item.status == "searching" for item in client.responses.retrieve(response.id).output):
        assert time.monotonic() < deadline, "the call never ran"
        time.sleep(0.05)
    assert client.responses.cancel(response.id).status == "cancelled"
    (call,) = [item for item in client.responses.retrieve(response.id).output if item.type == "web_search_call"]
    assert call.status == "incomplete" and call.action.type == "open_page"


def test_every_layer_of_an_encoding_is_bounded_on_its_own() -> None:
    """256 MiB of zeros in two gzip layers, under a limit the outer layer's output (~256 KB) fits: only the
    inner layer's own bound stops it, at the limit, without unpacking it (the page test's bomb trips the
    outer layer first, so it cannot tell)."""
    from .web_site import gzip_bomb

    body = gzip_bomb(256)
    decoder = BoundedDecoder("gzip, gzip", max_bytes=1_000_000)
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge):
            for start in range(0, len(body), 4096):
                decoder.feed(body[start : start + 4096])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16_000_000, peak
