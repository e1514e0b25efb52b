"""The functions the `automations` agent tool gives the model (wakeups.py answers them): what the model is told."""

from __future__ import annotations

from typing import Any

SCHEDULE, LIST, CANCEL = "schedule_wakeup", "list_wakeups", "cancel_wakeup"

_SCHEDULE_PARAMETERS = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "A short name for the wake-up."},
        "instructions": {"type": "string", "description": "What you will be told when you wake up."},
        "delay_seconds": {"type": "integer", "description": "Wake up once, this many seconds from now."},
        "run_at": {"type": "string", "description": "Wake up once at this ISO 8601 time with its UTC offset."},
        "expression": {"type": "string", "description": "Wake up repeatedly on this five-field cron expression."},
        "timezone": {"type": "string", "description": "The IANA time zone of the cron expression."},
    },
    "required": ["name", "instructions"],
}
FUNCTIONS: list[dict[str, Any]] = [
    {
        "type": "function", "name": SCHEDULE, "strict": False, "parameters": _SCHEDULE_PARAMETERS,
        "description": "Schedule a wake-up of this session: once (delay_seconds or run_at) or repeatedly (expression and timezone).",
    },
    {"type": "function", "name": LIST, "strict": False, "description": "List this session's wake-ups.", "parameters": {"type": "object", "properties": {}}},
    {
        "type": "function", "name": CANCEL, "strict": False, "description": "Cancel one of this session's wake-ups.",
        "parameters": {"type": "object", "properties": {"automation_id": {"type": "string"}}, "required": ["automation_id"]},
    },
]  # fmt: skip
NAMES: frozenset[str] = frozenset((SCHEDULE, LIST, CANCEL))
