"""An OAuth 2 token endpoint and an MCP server that accepts only its newest access token, in one process: what
a vault's `mcp_oauth` credential is tested against.

The token endpoint takes the refresh_token grant from one client (HTTP Basic), rotates the refresh token at
each use (a spent one is refused), and issues short-lived access tokens; the MCP server answers 401 to any
other bearer than the newest unexpired one. `/stats` counts the refreshes.

Run: python -m tests.oauth_mcp_server --port P [--lifetime S] [--delay S]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import secrets
import time

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

CLIENT_ID, CLIENT_SECRET = "agent-client", "client-secret-4f1c"
FIRST_ACCESS, FIRST_REFRESH = "access-first-9d2e", "refresh-first-77aa"


class Tokens:
    def __init__(self, lifetime_s: float, delay_s: float) -> None:
        self.lifetime_s, self.delay_s = lifetime_s, delay_s
        self.access, self.refresh, self.expires_at = FIRST_ACCESS, FIRST_REFRESH, time.time() + 3600
        self.refreshes = 0

    async def token(self, request: Request) -> Response:
        await anyio.sleep(self.delay_s)  # a slow endpoint: replicas asking at once overlap
        form = await request.form()
        basic = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if request.headers.get("authorization") != f"Basic {basic}":
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if form.get("grant_type") != "refresh_token" or form.get("refresh_token") != self.refresh:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        self.refreshes += 1
        self.access, self.refresh = f"access-{secrets.token_hex(8)}", f"refresh-{secrets.token_hex(8)}"
        self.expires_at = time.time() + self.lifetime_s
        return JSONResponse({"access_token": self.access, "token_type": "Bearer", "expires_in": self.lifetime_s, "refresh_token": self.refresh})

    async def stats(self, request: Request) -> Response:
        return JSONResponse({"refreshes": self.refreshes})

    def valid(self, authorization: str | None) -> bool:
        return authorization == f"Bearer {self.access}" and time.time() < self.expires_at


class RequireToken:
    def __init__(self, app: ASGIApp, tokens: Tokens) -> None:
        self.app, self.tokens = app, tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            headers = dict(scope["headers"])
            given = headers.get(b"authorization", b"").decode()
            if not self.tokens.valid(given):
                await JSONResponse({"error": "invalid_token"}, status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--lifetime", type=float, default=30.0)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    tokens = Tokens(args.lifetime, args.delay)
    server = MCPServer("oauth", instructions="A server behind OAuth.")

    @server.tool()
    def whoami(ctx: Context) -> str:
        """A digest of the bearer this call carried."""
        given = (ctx.headers or {}).get("authorization", "")
        return "token=" + hashlib.sha256(given.encode()).hexdigest()[:12]

    app = server.streamable_http_app()
    app.router.routes += [Route("/token", tokens.token, methods=["POST"]), Route("/stats", tokens.stats, methods=["GET"])]
    app.add_middleware(RequireToken, tokens=tokens)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
