"""Runs Claude Code itself (the CLI bundled in PyPI's `claude-agent-sdk`) against a gateway, offline, as
`shared/reference/CLAUDE_CODE.md` describes: its home private to a work directory, every connection on the
gateway's base URL, permissions bypassed (the work directory is the test's own)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import claude_agent_sdk

CLAUDE = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"


@dataclass
class Session:
    """One `claude -p` run: its stream-json events, and what it ended with."""

    events: list[dict[str, Any]]
    returncode: int
    stderr: str
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return str(self.result.get("result", ""))

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool results Claude Code fed back, in order (its `user` events' `tool_result` blocks)."""
        found = []
        for event in self.events:
            if event.get("type") == "user":
                content = event["message"]["content"]
                found += [block for block in content if isinstance(block, dict) and block.get("type") == "tool_result"]
        return found

    def tool_uses(self) -> list[dict[str, Any]]:
        found = []
        for event in self.events:
            if event.get("type") == "assistant":
                found += [block for block in event["message"]["content"] if block.get("type") == "tool_use"]
        return found


def environment(gateway_url: str, home: Path, **extra: str) -> dict[str, str]:
    base = {
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "IS_SANDBOX": "1",
        "ANTHROPIC_BASE_URL": gateway_url,
        "ANTHROPIC_API_KEY": "sk-unused",
        "CLAUDE_CODE_MAX_CONTEXT_TOKENS": "131072",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
    }
    kept = {name: value for name, value in os.environ.items() if name in ("PATH", "LANG", "TMPDIR")}
    return kept | base | extra


def run(gateway_url: str, workdir: Path, prompt: str, *flags: str, timeout: float = 120, **env: str) -> Session:
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    command = [str(CLAUDE), "-p", prompt, "--output-format", "stream-json", "--verbose", "--permission-mode", "bypassPermissions", *flags]
    done = subprocess.run(command, env=environment(gateway_url, home, **env), cwd=workdir, capture_output=True, text=True, timeout=timeout)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    result = next((event for event in reversed(events) if event.get("type") == "result"), {})
    return Session(events, done.returncode, done.stderr, result)
