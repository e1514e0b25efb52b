"""Claude Code itself, through the Messages door, against the scripted model: tool turns, loops, a
conversation continued, a subagent, tool search and a deferred tool, `/context`, a JSON-schema answer, the
default and a Claude-4.5-style model name, an engine cut mid-answer, and a context it must compact."""

from __future__ import annotations

import json
from pathlib import Path

from . import claude_code
from .conftest import Gateway, Process, emulator_stats, gateway_config, start_emulator


def bash(command: str) -> str:
    return "[[call functions.Bash " + json.dumps({"command": command, "description": "run it"}) + "]]"


def test_a_bash_tool_turn(gateway: Gateway, tmp_path: Path) -> None:
    session = claude_code.run(gateway.url, tmp_path, f"say it {bash('echo hello-from-bash')}")
    assert session.returncode == 0, session.stderr
    (result,) = session.tool_results()
    assert "hello-from-bash" in str(result["content"]) and not result.get("is_error")
    assert session.text == "The tool said: hello-from-bash" and session.result["subtype"] == "success"


def test_a_loop_of_several_steps_on_files(gateway: Gateway, tmp_path: Path) -> None:
    steps = bash("printf plum > fruit.txt") + " " + bash("cat fruit.txt")
    session = claude_code.run(gateway.url, tmp_path, f"write then read {steps}")
    assert session.returncode == 0, session.stderr
    assert [use["name"] for use in session.tool_uses()] == ["Bash", "Bash"]
    assert (tmp_path / "fruit.txt").read_text() == "plum" and session.text == "The tool said: plum"


def test_continue_goes_on_with_the_conversation(gateway: Gateway, tmp_path: Path) -> None:
    first = claude_code.run(gateway.url, tmp_path, "the word is quince")
    assert first.returncode == 0 and first.text.endswith("the word is quince"), first.stderr
    second = claude_code.run(gateway.url, tmp_path, "what was it? [recall]", "--continue")
    assert second.returncode == 0, second.stderr
    users, finals = second.text.split(" finals=")
    assert "the word is quince" in users and "the word is quince" in finals  # the first turn's ask and answer


def test_a_subagent_answers_its_parent(gateway: Gateway, tmp_path: Path) -> None:
    agent = {"description": "greet", "prompt": "say hello, subagent", "subagent_type": "general-purpose", "run_in_background": False}
    session = claude_code.run(gateway.url, tmp_path, "delegate [[call functions.Agent " + json.dumps(agent) + "]]")
    assert session.returncode == 0, session.stderr
    (result,) = session.tool_results()
    assert "You said:" in str(result["content"]) and "say hello, subagent" in str(result["content"])


def test_tool_search_then_the_deferred_tool_it_found(gateway: Gateway, emulator: Process, tmp_path: Path) -> None:
    # `[notes]`: Claude Code's "Tool loaded." beside the search's result is not a new ask (tests/emulator.py).
    asked = 'find it [notes] [[call functions.ToolSearch {"query":"select:CronList"}]] [[call functions.CronList {}]]'
    session = claude_code.run(gateway.url, tmp_path, asked)
    assert session.returncode == 0, session.stderr
    assert [use["name"] for use in session.tool_uses()] == ["ToolSearch", "CronList"]
    search, listed = session.tool_results()
    assert search["content"] == [{"type": "tool_reference", "tool_name": "CronList"}] and not listed.get("is_error")
    assert session.text == f"The tool said: {listed['content']}"
    prompt = emulator_stats(emulator)["last_prompt"]
    assert prompt.count("type CronList =") == 1 and "type DeferredToolPlaceholder" not in prompt


def test_context_is_counted_by_the_gateway(gateway: Gateway, tmp_path: Path) -> None:
    session = claude_code.run(gateway.url, tmp_path, "/context")
    assert session.returncode == 0, session.stderr
    assert "Context Usage" in session.text and "System tools" in session.text


def test_a_json_schema_answer(gateway: Gateway, tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    session = claude_code.run(
        gateway.url, tmp_path, 'a city [[call functions.StructuredOutput {"city":"Paris"}]]', "--json-schema", json.dumps(schema)
    )
    assert session.returncode == 0, session.stderr
    assert session.result["structured_output"] == {"city": "Paris"}


def test_a_claude_4_5_name_thinks_with_a_budget(gateway: Gateway, tmp_path: Path) -> None:
    session = claude_code.run(gateway.url, tmp_path, "how hard? [instructions]", ANTHROPIC_MODEL="claude-sonnet-4-5-20250929")
    assert session.returncode == 0, session.stderr
    assert "effort=high" in session.text  # `thinking: {"type": "enabled", "budget_tokens": 31999}`


def test_an_engine_cut_mid_answer_is_resumed(gateway: Gateway, tmp_path: Path) -> None:
    session = claude_code.run(gateway.url, tmp_path, "carry on [crash 12] [crash-error 30]")
    assert session.returncode == 0, session.stderr
    assert session.text.endswith("carry on [crash 12] [crash-error 30]")


def test_a_context_too_long_is_compacted_by_claude_code(tmp_path: Path) -> None:
    emulator = start_emulator(tmp_path, "--max-model-len", "16000")
    try:
        gateway = Gateway(gateway_config(emulator.url, tmp_path), tmp_path).start()
        try:
            session = claude_code.run(gateway.url, tmp_path, f"count {bash('seq 1 2500')} {bash('seq 1 2500')}", timeout=300)
            log = next(tmp_path.glob("gateway-*.log")).read_text()
        finally:
            gateway.stop()
    finally:
        emulator.stop()
    assert "POST /v1/messages 400" in log  # the prompt outgrew the context: Anthropic's "prompt is too long"
    assert session.returncode == 0 and session.result["subtype"] == "success", (session.stderr, session.result)
    assert log.count("POST /v1/messages 200") >= 3  # the turn before, Claude Code's summary, the turn after it


def test_an_answer_the_gateway_cannot_finish_is_an_error_claude_code_retries(gateway: Gateway, tmp_path: Path) -> None:
    before = gateway.log.read_text().count("POST /v1/messages 200")
    session = claude_code.run(gateway.url, tmp_path, "fail [midstream-error]")
    assert session.returncode == 1 and "The engine failed" in session.text  # the stream's `error` event, as Claude Code tells it
    assert gateway.log.read_text().count("POST /v1/messages 200") - before >= 2  # it asked again after the error event
