"""One signed POST of an event to an endpoint, where the endpoint may be sent to.

An endpoint's URL is the client's, so a hostile one (a cloud metadata address, the database's port) is
refused as the browser refuses a page: it must be https and resolve to public addresses only, checked at
every attempt and connected to at the address checked (a name that resolves elsewhere the second time
gains nothing). A URL matching `webhooks.allowed_urls` is the operator's choice, and goes where it says,
http included. Redirects are not followed; the answer's body is not read; every attempt is bounded in time.
"""

from __future__ import annotations

import time

import anyio
import httpx

from connectors.browser.guard import AddressPolicy, BlockedURL
from connectors.outbound import Destination, destination
from runtime.fair import FairLimiter

from .signing import signature_header

USER_AGENT = "harmony-gateway-webhooks/1"


class NotSent(Exception):
    """No answer came: the URL is refused, the connection failed, or the time ran out; the message says which."""


TEST_SLOTS = 8  # `/test` calls sent at once, every tenant's: beside the deliverer's connections, never in them


class Sender:
    def __init__(self, allowed_urls: list[str], timeout_s: float, max_connections: int, tests_per_tenant: int = 2) -> None:
        self.allowed_urls = allowed_urls
        self.timeout_s = timeout_s
        self._policy = AddressPolicy()
        # Test events wait their tenant's turn for a slot of their own: a tenant testing endpoints that
        # never answer holds neither the deliverer's connections nor another tenant's tests.
        self.tests = FairLimiter(TEST_SLOTS, tests_per_tenant)
        max_connections += TEST_SLOTS
        # trust_env off: a proxy from the environment would reach what the guard did not check.
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=timeout_s, limits=limits)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def destination(self, url: str) -> Destination:
        """Where `url` may be sent to, found within `timeout_s`; raises BlockedURL, saying why."""
        return await destination(url, self.allowed_urls, self._policy, self.timeout_s, "webhooks.allowed_urls")

    async def send(self, url: str, webhook_id: str, payload: bytes, secrets: list[str]) -> int:
        """POST the event, signed with each of `secrets` (in the clear); the status code answered. Raises NotSent."""
        try:
            with anyio.fail_after(self.timeout_s):
                destination = await self.destination(url)
                timestamp = int(time.time())  # each attempt's own: receivers refuse old timestamps (replays)
                headers = {
                    "Content-Type": "application/json",
                    "User-Agent": USER_AGENT,
                    "webhook-id": webhook_id,
                    "webhook-timestamp": str(timestamp),
                    "webhook-signature": signature_header(webhook_id, timestamp, payload, secrets),
                    **destination.headers,
                }
                request = self._http.build_request(
                    "POST", destination.connect_url, content=payload, headers=headers, extensions=destination.extensions
                )
                response = await self._http.send(request, stream=True)
                await response.aclose()  # the body is the receiver's business: never read, so never too large
                return response.status_code
        except TimeoutError:
            raise NotSent(f"no answer within {self.timeout_s:g} s") from None
        except BlockedURL as exc:
            raise NotSent(str(exc)) from None
        except (httpx.HTTPError, httpx.InvalidURL, UnicodeError, ValueError) as exc:
            raise NotSent(f"{type(exc).__name__}: {str(exc)[:200]}") from None
