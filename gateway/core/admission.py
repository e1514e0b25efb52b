"""How many foreground responses run here at once, per tenant and in all.

A response holds memory (its request, its dialog, what its tools read) and a place in the engine's queue
for as long as it runs. Background runs are counted in the store (`loop.max_background_per_tenant`);
foreground ones, over HTTP, Chat Completions and the WebSocket alike, take a slot here when they launch
and give it back when their run ends. Past either cap the request is OpenAI's 429, before anything of
it is planned or read.
"""

from __future__ import annotations

from collections import Counter

from ..errors import APIError, Overloaded


class Slot:
    """One running response's place; `release()` may be called any number of times."""

    def __init__(self, admission: "Admission", tenant: str) -> None:
        self._admission: Admission | None = admission
        self.tenant = tenant

    def release(self) -> None:
        admission, self._admission = self._admission, None
        if admission is not None:
            admission._release(self.tenant)


class Admission:
    def __init__(self, per_tenant: int, total: int) -> None:
        self.per_tenant = per_tenant
        self.total = total
        self._running: Counter[str] = Counter()
        self._count = 0

    def admit(self, tenant: str) -> Slot:
        if self._running[tenant] >= self.per_tenant:
            raise APIError(
                429, f"You have {self.per_tenant} responses running on this gateway, as many as it runs for one project at once; "
                "wait for one to end.", type="requests", code="rate_limit_exceeded",
            )  # fmt: skip
        if self._count >= self.total:
            raise Overloaded(
                429, f"This gateway is running {self.total} responses, as many as it runs at once; try again shortly.",
                type="requests", code="rate_limit_exceeded",
            )  # fmt: skip
        self._running[tenant] += 1
        self._count += 1
        return Slot(self, tenant)

    def _release(self, tenant: str) -> None:
        self._count -= 1
        self._running[tenant] -= 1
        if not self._running[tenant]:
            del self._running[tenant]
