"""Search servers' answers in the shapes real servers give them, read as results (connectors/browser/answers.py),
and end to end through real MCP search tools that answer with a JSON string and with text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from connectors.browser.answers import read_answer, says_none

from .conftest import Process, emulator_stats
from .test_browser import browser_config, search_server, site  # noqa: F401  (the site fixture)

RESULTS = [
    {"title": "Zebras of the Serengeti", "url": "https://example.org/zebra", "snippet": "Zebras live in herds."},
    {"title": "Lions and their prides", "url": "https://example.org/lion", "snippet": "Lions live in prides."},
]
EXPECTED = [(r["title"], r["url"], r["snippet"]) for r in RESULTS]

BRAVE_TEXT = "\n\n".join(f"Title: {r['title']}\nDescription: {r['snippet']}\nURL: {r['url']}" for r in RESULTS)
MARKDOWN_LIST = "\n".join(f"{n}. [{r['title']}]({r['url']})\n   {r['snippet']}" for n, r in enumerate(RESULTS, 1))
BOLD_LABELS = "\n\n".join(f"**Title:** {r['title']}\n**Link:** {r['url']}\n**Snippet:** {r['snippet']}" for r in RESULTS)
BARE_URLS = "\n\n".join(f"{r['title']}\n{r['url']}\n{r['snippet']}" for r in RESULTS)


@pytest.mark.parametrize(
    "structured, text",
    [
        ({"results": RESULTS}, ""),  # structured content
        (None, json.dumps(RESULTS)),  # JSON text
        ({"result": json.dumps(RESULTS)}, json.dumps(RESULTS)),  # the official SDK's wrapping of a JSON string
        ({"result": json.dumps({"web": {"results": RESULTS}})}, ""),  # an API's nesting, wrapped
        (None, json.dumps({"data": {"organic": [{"link": r["url"], "name": r["title"], "description": r["snippet"]} for r in RESULTS]}})),
        (None, BRAVE_TEXT),  # Title / Description / URL blocks
        ({"result": BRAVE_TEXT}, BRAVE_TEXT),  # text, wrapped by the SDK
        (None, MARKDOWN_LIST),  # a numbered list of Markdown links
        (None, BOLD_LABELS),
        (None, BARE_URLS),
    ],
    ids=["structured", "json-text", "sdk-wrapped", "nested", "other-keys", "labelled-text", "wrapped-text", "markdown", "bold-labels", "bare-urls"],
)
def test_answer_shapes_are_read(structured: Any, text: str) -> None:
    assert [(r.title, r.url, r.snippet) for r in read_answer(structured, text)] == EXPECTED


def test_text_without_urls_holds_no_results() -> None:
    assert read_answer(None, "No results found for your query.") == []
    assert read_answer({"result": "rate limited"}, "rate limited") == []
    # An empty list in JSON says "nothing found" (no results, not a failed search); text does not.
    assert says_none(None, "[]") and says_none({"results": []}, "") and says_none({"result": '{"items": []}'}, "")
    assert not says_none(None, "No results found.") and not says_none({"results": RESULTS}, "")


@pytest.mark.parametrize("tool", ["search_json_text", "search_text"])
def test_search_servers_answering_as_text(emulator: Process, site: Process, make_gateway: Any, tool: str) -> None:  # noqa: F811
    config = browser_config(search={"type": "mcp", "server": "websearch", "tool": tool, "count_argument": "max_results"})
    gateway = make_gateway(emulator.url, tool_servers=[search_server(site)], browser=config)
    search = '[[browser search {"query": "zebra stripes"}]]'
    response = gateway.client().responses.create(model="openai/gpt-oss-20b", input=search, tools=[{"type": "web_search"}])
    assert response.output[1].status == "completed", response.output_text
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "Zebras of the Serengeti" in prompt and "Lions and their prides" in prompt
