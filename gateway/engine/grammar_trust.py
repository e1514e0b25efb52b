"""Whether an engine enforces the grammar sent with a call (`structured_outputs`), as far as the gateway knows.

vLLM ignores request fields it does not know: one older than 0.10.2 takes `structured_outputs` and answers
200 with nothing enforced, so its answer to a request cannot tell. Its `/version` says what it should do;
what it writes says what it does: a grammar-held call or answer that breaks its grammar marks the engine
(loop/engine_calls.py), and from then on no grammar is sent to it and its calls are held back and checked,
as where the operator turned grammars off."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

READS_STRUCTURED_OUTPUTS = (0, 10, 2)  # the first vLLM release whose completions read `structured_outputs`
_RELEASE = re.compile(r"(\d{1,6})\.(\d{1,6})(?:\.(\d{1,6}))?")


class Enforcement(enum.StrEnum):
    ENFORCED = "enforced"  # a release that reads the grammar, and nothing it wrote broke one
    UNVERIFIED = "unverified"  # its release is not known (no vLLM `/version`): trusted, and checked
    IGNORED = "ignored"  # too old a release, or seen writing what a grammar forbids: no grammar is sent


def release(version: str) -> tuple[int, int, int] | None:
    """`0.11.0`, `0.10.2rc1+cu128` → their numbers; None for anything else."""
    found = _RELEASE.match(version[:64])
    if found is None:
        return None
    return int(found.group(1)), int(found.group(2)), int(found.group(3) or 0)


@dataclass
class GrammarTrust:
    """One engine URL's: its reported version, and whether it was seen breaking a grammar."""

    version: str | None = None
    broken: bool = False

    def read_version(self, version: str | None) -> None:
        """The version the engine reports now: another release (a restart) is trusted, and checked, again."""
        if version is not None and self.version is not None and version != self.version:
            self.broken = False
        if version is not None:
            self.version = version

    @property
    def enforcement(self) -> Enforcement:
        if self.broken:
            return Enforcement.IGNORED
        found = release(self.version) if self.version is not None else None
        if found is None:
            return Enforcement.UNVERIFIED
        return Enforcement.ENFORCED if found >= READS_STRUCTURED_OUTPUTS else Enforcement.IGNORED

    def broke(self) -> bool:
        """It wrote what a grammar it was sent forbids; True the first time."""
        first, self.broken = not self.broken, True
        return first
