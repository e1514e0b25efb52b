"""The control API the gateway registers grants with: `PUT /grants/{token}` (a grant, grants.py),
`DELETE /grants/{token}`, `GET /ca.pem` (the certificate sandboxes trust), `GET /health`. Every call but the
health check carries the control key as a bearer token; the API listens apart from the proxy itself, on
an address sandboxes cannot reach (compose.yaml), so the key is a second lock, not the only one."""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

import tornado.web

from .grants import MAX_GRANT_BYTES, BadGrant, Grants, parse_grant


class _Authorized(tornado.web.RequestHandler):
    def initialize(self, grants: Grants, key: str, ca: Path) -> None:
        self.grants, self.key, self.ca = grants, key, ca

    def prepare(self) -> None:
        given = self.request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.key}".encode()):
            raise tornado.web.HTTPError(401)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None))[1]
        self.finish({"error": str(exc.log_message if isinstance(exc, tornado.web.HTTPError) else self._reason)})


class GrantHandler(_Authorized):
    def put(self, token: str) -> None:
        try:
            self.grants.put(token, parse_grant(self.request.body))
        except BadGrant as exc:
            raise tornado.web.HTTPError(400, str(exc)) from None
        self.set_status(204)

    def delete(self, token: str) -> None:
        self.grants.drop(token)
        self.set_status(204)


class CAHandler(_Authorized):
    def get(self) -> None:
        self.set_header("Content-Type", "application/x-pem-file")
        self.finish(self.ca.read_bytes())


class HealthHandler(tornado.web.RequestHandler):
    def get(self) -> None:
        self.finish({"status": "ok"})


def application(grants: Grants, key: str, ca: Path) -> tornado.web.Application:
    args = {"grants": grants, "key": key, "ca": ca}
    return tornado.web.Application(
        [(r"/grants/([A-Za-z0-9_-]{1,64})", GrantHandler, args), (r"/ca\.pem", CAHandler, args), (r"/health", HealthHandler)],
        max_body_size=MAX_GRANT_BYTES,
    )
