"""`service_tier`: OpenAI's processing tiers, onto vLLM's request `priority`.

vLLM started with `--scheduling-policy priority` serves lower values first (the default is 0); started
without it, it refuses any other value. So `priority` and `flex` are taken only where the operator says the
engine schedules by priority (`engine.priority_scheduling`), and are a 400 otherwise. There, each engine
call after a tool's output also goes one step ahead of its tier: a running agent keeps its place ahead of
new requests of the same tier.
"""

from __future__ import annotations

from typing import Literal

from ...errors import bad_request

ServiceTier = Literal["auto", "default", "flex", "priority"]
EngineTier = Literal["default", "flex", "priority"]
_PRIORITY: dict[EngineTier, int] = {"priority": -10, "default": 0, "flex": 10}


def engine_tier(requested: ServiceTier | None, priority_scheduling: bool) -> EngineTier:
    """The tier a request is served in (and its response echoes); a 400 for one the engine cannot give."""
    if requested is None or requested == "auto" or requested == "default":
        return "default"
    if not priority_scheduling:
        raise bad_request(
            f"service_tier '{requested}' is not available: the engine does not schedule requests by priority (engine.priority_scheduling).",
            param="service_tier",
        )
    return requested


def engine_priority(tier: EngineTier, priority_scheduling: bool, continuing: bool) -> int | None:
    """vLLM's `priority` for one engine call (None: not sent, the engine's default)."""
    if not priority_scheduling:
        return None
    priority = _PRIORITY[tier] - (1 if continuing else 0)
    return priority or None
