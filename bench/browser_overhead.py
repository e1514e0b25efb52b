"""Gateway overhead of one browser call (not a timed test; prints figures).

The test web site (tests/web_site.py) and the MCP search server (tests/search_server.py) are the
backends. Each browser function is called through the gateway's path, `Browser.call` (arguments parsed,
the address guard, the backend, the page cleaned to text, the view rendered), and the backend's own time
is measured alone in the same blocks:
  * search: `browser.search` through a kept MCPConnection, against the search server's `tools/call` alone;
  * open: `browser.open` by URL through the gateway's HTTP client, against a plain GET of the same page
    (the page cleaned to text by trafilatura is gateway work, reported on its own as well);
  * find: `browser.find` on the opened page (no backend).
Also: the citation rewriter's time per cited answer.

Run: .venv/bin/python bench/browser_overhead.py [--calls 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from connectors.browser.backends import HttpFetcher, McpSearch, to_page  # noqa: E402
from connectors.browser.guard import AddressPolicy  # noqa: E402
from connectors.browser.session import BrowseOptions, Browser  # noqa: E402
from connectors.connection import MCPConnection, ServerSpec  # noqa: E402
from gateway.responses.events.citations import CitationRewriter  # noqa: E402
from tests.conftest import Process, free_port  # noqa: E402

BLOCK = 20


async def timed(work: Callable[[], Awaitable[Any]], calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await work()
        times.append((time.perf_counter() - started) * 1000)
    return times


async def compare(name: str, gateway: Callable[[], Awaitable[Any]], backend: Callable[[], Awaitable[Any]], calls: int) -> None:
    through, alone = [], []
    for _ in range(max(1, calls // BLOCK)):  # alternating blocks: both see the same machine state
        through += await timed(gateway, BLOCK)
        alone += await timed(backend, BLOCK)
    p50_through, p50_alone = statistics.median(through), statistics.median(alone)
    print(
        f"{name:11s} through the browser p50 {p50_through:6.2f} ms, backend alone p50 {p50_alone:6.2f} ms: "
        f"gateway overhead {p50_through - p50_alone:5.2f} ms per call"
    )


async def main(calls: int) -> None:
    tmp = Path("/tmp") / f"bench-browser-{free_port()}"
    tmp.mkdir(exist_ok=True)
    port = free_port()
    site = Process([sys.executable, "-m", "tests.web_site", "--port", str(port)], port, "/health", tmp / "site.log").start()
    spec = ServerSpec(label="websearch", transport="stdio", command=(sys.executable, "-m", "tests.search_server", "--site", site.url), cwd=str(ROOT))
    connection = MCPConnection(spec)
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(connection.run)
            await connection.wait_attempt(30)
            search = McpSearch(lambda: connection, "search", "query", "max_results", None, 20)
            fetcher = HttpFetcher(AddressPolicy(["127.0.0.1/32"]), 2_000_000, 10, "bench")
            url = site.url + "/articles/zebra"
            async with httpx.AsyncClient() as plain:

                def browser() -> Browser:
                    return Browser(search, fetcher, BrowseOptions(page_budget=10**9))

                arguments = json.dumps({"query": "zebra stripes"})
                await compare(
                    "search",
                    lambda: browser().call("search", arguments),
                    lambda: connection.call("search", {"query": "zebra stripes", "max_results": 10}),
                    calls,
                )
                for name, target in (("open", url), ("open 100 KB", site.url + "/long")):
                    opening = json.dumps({"id": target})
                    await compare(name, lambda: browser().call("open", opening), lambda: plain.get(target), calls)  # noqa: B023
                    page = (await plain.get(target)).text
                    extraction = await timed(lambda: anyio.to_thread.run_sync(to_page, target, "html", page), calls)  # noqa: B023
                    print(f"        of which cleaning the page to text (trafilatura, {len(page)} bytes): p50 {statistics.median(extraction):.2f} ms")
                opening = json.dumps({"id": url})

                opened = browser()
                await opened.call("open", opening)
                finding = json.dumps({"pattern": "stripes", "cursor": 0})

                async def nothing() -> None:
                    return None

                await compare("find", lambda: opened.call("find", finding), nothing, calls)

            answer = "Zebras have stripes【0†L2-L3】 that deter flies【0†L5】, as lions know【0†L0】. " * 4
            resolve = lambda cursor, line: (url, "Zebras of the Serengeti")  # noqa: E731

            async def rewrite() -> None:
                rewriter = CitationRewriter(resolve)
                for start in range(0, len(answer), 4):  # streamed a few characters at a time, as tokens come
                    rewriter.feed(answer[start : start + 4])
                rewriter.flush()

            times = await timed(rewrite, calls)
            print(f"citations: an answer of {len(answer)} characters with 12 citations rewritten in {statistics.median(times) * 1000:.0f} µs p50")
            await fetcher.aclose()
            connection.close()
            tasks.cancel_scope.cancel()
    finally:
        site.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    anyio.run(main, parser.parse_args().calls)
