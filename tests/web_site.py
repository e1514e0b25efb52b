"""A small web site for the browser's tests, served on loopback by a real HTTP server (uvicorn).

Articles in HTML (with links within the site and out of it), a text file, and pages that misbehave: one
that answers too slowly, one too large, one that is an image, one that redirects to an address the
browser may not open. `ARTICLES` is also the corpus of the MCP search server (tests/search_server.py).

Run: python -m tests.web_site --port P
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gzip
import zlib

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

FILLER = "This sentence pads the paragraph so that the page reads like an article and not a stub. "

# path → (title, paragraphs); links are written into the paragraphs as HTML.
ARTICLES = {
    "/articles/zebra": (
        "Zebras of the Serengeti",
        [
            "Zebras live in herds on the grasslands of East Africa. " + FILLER * 2,
            "Every zebra has its own pattern of black and white stripes, as unique as a fingerprint. " + FILLER,
            'Their main predator is the lion, described in <a href="/articles/lion">our lion article</a>. ' + FILLER,
            'Researchers at <a href="https://example.org/stripes">the stripes project</a> study why stripes evolved. ' + FILLER,
            "Stripes may confuse biting flies, which land less often on striped hides. " + FILLER * 2,
        ],
    ),
    "/articles/lion": (
        "Lions and their prides",
        [
            "Lions live in prides of related females and a few males. " + FILLER * 2,
            "A pride hunts zebra and wildebeest at night, when the grass hides them. " + FILLER,
        ],
    ),
}


def article(path: str) -> str:
    title, paragraphs = ARTICLES[path]
    body = "".join(f"<p>{paragraph}</p>" for paragraph in paragraphs)
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body>"
        f'<nav><a href="/">Home</a> <a href="/about">About</a></nav>'
        f"<article><h1>{title}</h1>{body}</article><footer>Copyright the test site</footer></body></html>"
    )


@functools.lru_cache(maxsize=1)
def gzip_bomb(megabytes: int = 256) -> bytes:
    inner = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1024 * 1024)
    packed = b"".join(inner.compress(zeros) for _ in range(megabytes)) + inner.flush()
    return gzip.compress(packed, 9)


def create_site() -> Starlette:
    async def show(request: Request) -> Response:
        return HTMLResponse(article(request.url.path))

    async def long(request: Request) -> Response:
        # An article of a usual web page's size (~100 KB of HTML): for the benchmark.
        paragraphs = "".join(
            f'<p>Section {n}: {FILLER * 4}See <a href="/articles/lion">the lions</a> and <a href="https://example.org/{n}">source {n}</a>.</p>'
            for n in range(200)
        )
        return HTMLResponse(f"<html><head><title>A long article</title></head><body><nav>Menu</nav><article>{paragraphs}</article></body></html>")

    async def notes(request: Request) -> Response:
        return PlainTextResponse("Field notes\n\nA zebra foal can stand within an hour of birth.\n")

    async def slow(request: Request) -> Response:
        await asyncio.sleep(float(request.query_params.get("s", "10")))
        return HTMLResponse("<html><body><p>Late.</p></body></html>")

    async def big(request: Request) -> Response:
        return HTMLResponse("<html><body>" + "<p>" + "stripes " * 1000 + "</p>" * 1 + "x" * (3 * 1024 * 1024) + "</body></html>")

    async def image(request: Request) -> Response:
        return Response(b"\x89PNG\r\n\x1a\n" + b"\0" * 64, media_type="image/png")

    async def away(request: Request) -> Response:
        # To another loopback address, which the tests' browser is not allowed to open.
        port = request.url.port
        return RedirectResponse(f"http://127.0.0.2:{port}/articles/zebra", status_code=302)

    async def bomb(request: Request) -> Response:
        # `Content-Encoding: gzip, gzip`: a few kilobytes that unpack to 256 MiB of zeros.
        return Response(gzip_bomb(), media_type="text/html", headers={"content-encoding": "gzip, gzip"})

    async def unparsable(request: Request) -> Response:
        # A redirect to URLs no parser reads the same way.
        return Response(status_code=302, headers={"location": request.query_params.get("to", "http:127.0.0.1:1/x")})

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(
        routes=[
            *[Route(path, show) for path in ARTICLES],
            Route("/notes.txt", notes),
            Route("/long", long),
            Route("/slow", slow),
            Route("/big", big),
            Route("/image.png", image),
            Route("/away", away),
            Route("/bomb", bomb),
            Route("/unparsable", unparsable),
            Route("/health", health),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    gzip_bomb()  # made before the site answers its health check: a request for it only sends its bytes
    uvicorn.run(create_site(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
