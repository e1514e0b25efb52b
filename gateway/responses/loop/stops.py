"""Stop sequences (Chat Completions' `stop`) on the visible text of a message.

The engine's own `stop` would act on the raw Harmony text, analysis channel and all, so the gateway
applies them to what the client sees: text is passed on as it streams, except a tail that could be the
start of a stop sequence, which is held back until the next delta tells whether it is one. When one
is found, the text before it is the message's last, and generation stops.
"""

from __future__ import annotations

MAX_STOPS = 4  # OpenAI's limit
MAX_STOP_CHARS = 256


class StopMatcher:
    """Watches one message's text for the request's stop sequences."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self.held = ""  # the tail of the text so far that may begin a stop sequence
        self.matched: str | None = None  # the stop sequence that ended the message

    def feed(self, text: str) -> tuple[str, bool]:
        """The text to pass on now, and whether a stop sequence ends the message (the text before it is
        passed on, nothing after it)."""
        text = self.held + text
        found = [(index, stop) for stop in self.stops if (index := text.find(stop)) >= 0]
        if found:
            self.held = ""
            index, self.matched = min(found)
            return text[:index], True
        keep = max(self._prefix_tail(text, stop) for stop in self.stops)
        self.held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep], False

    def flush(self) -> str:
        """The message ended without a stop sequence: what was held back is text after all."""
        held, self.held = self.held, ""
        return held

    @staticmethod
    def _prefix_tail(text: str, stop: str) -> int:
        """The length of the longest end of `text` that is a proper beginning of `stop`."""
        for length in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:length]):
                return length
        return 0
