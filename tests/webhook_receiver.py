"""A webhook receiver for the tests: a real HTTP server on loopback that records what arrives, answers as
the test scripts it (a status per request, a request held until released), and checks signatures with
the openai SDK's own `webhooks.unwrap`, as an app written for OpenAI would."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai

from .conftest import free_port


@dataclass(frozen=True)
class Delivery:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]

    def unwrap(self, secret: str) -> Any:
        """The event, if signed with `secret` (else the SDK's InvalidWebhookSignatureError)."""
        return openai.OpenAI(api_key="unused").webhooks.unwrap(self.body, self.headers, secret=secret)


class Receiver:
    def __init__(self, answers: list[int] | None = None, hold: int = 0, delay_s: float = 0.0) -> None:
        self.answers = list(answers or [])  # the status of each request in turn; then 200
        self.hold = hold  # the first `hold` requests wait for `release` before they are answered
        self.delay_s = delay_s
        self.released = threading.Event()
        self.deliveries: list[Delivery] = []
        self._arrived = threading.Condition(threading.RLock())
        self.port = free_port()
        self.origin = f"http://127.0.0.1:{self.port}/"
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with receiver._arrived:
                    receiver.deliveries.append(Delivery(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.time()))
                    number = len(receiver.deliveries)
                    status = receiver.answers.pop(0) if receiver.answers else 200
                    receiver._arrived.notify_all()
                if number <= receiver.hold:
                    receiver.released.wait(60)
                time.sleep(receiver.delay_s)
                try:
                    self.send_response(status)
                    self.send_header("Location", f"{receiver.origin}redirected")  # answered 200 there, if it were followed
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:  # the gateway that sent it is gone
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def url(self, path: str = "hook") -> str:
        return f"{self.origin}{path}"

    def to(self, path: str) -> list[Delivery]:
        with self._arrived:
            return [delivery for delivery in self.deliveries if delivery.path == f"/{path}"]

    def wait_for(self, count: int, path: str = "hook", timeout: float = 20) -> list[Delivery]:
        """The first `count` deliveries to `path`, once they have arrived."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.to(path)) >= count, timeout):
                raise AssertionError(f"{len(self.to(path))} deliveries to /{path} arrived in {timeout:g} s, not {count}")
        return self.to(path)[:count]

    def stop(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()
