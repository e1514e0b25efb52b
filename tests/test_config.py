"""Configuration, CLI start-up and the offline vocabulary."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from gateway.config import ConfigError, load_config, parse_config
from gateway.engine import harmony
from gateway.engine.vocab import VOCAB_FILE, VOCAB_SHA256, ensure_vocabulary

from .conftest import ROOT


def test_env_expansion_with_defaults(monkeypatch):
    monkeypatch.setenv("ENGINE_HOST", "vllm")
    monkeypatch.delenv("ENGINE_PORT", raising=False)
    config = parse_config({"engine": {"url": "http://${ENGINE_HOST}:${ENGINE_PORT:-8000}"}, "server": {"port": "${PORT:-9090}"}})
    assert config.engine.url == "http://vllm:8000"
    assert config.server.port == 9090


def test_missing_variable_names_the_key(monkeypatch):
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    with pytest.raises(ConfigError, match=r"engine\.api_key: environment variable NOPE_TOKEN is not set"):
        parse_config({"engine": {"url": "http://x", "api_key": "${NOPE_TOKEN}"}})


@pytest.mark.parametrize(
    "raw, key",
    [
        ({}, "(root)"),  # "give exactly one of 'engine' (one engine) and 'engines' (a list, by model)"
        ({"engine": {"url": "http://x"}, "engines": [{"url": "http://y", "model": "m"}]}, "(root)"),
        ({"engines": [{"url": "http://x"}, {"url": "http://y", "model": "m"}]}, "(root)"),  # which is engines[0]?
        ({"engines": [{"url": "http://x", "model": "a", "aliases": ["b"]}, {"url": "http://y", "model": "b"}]}, "(root)"),
        ({"engines": [{"url": "http://x", "model": "a", "resume_attempts": -1}]}, "engines[0].resume_attempts"),
        ({"engine": {}}, "engine.url"),
        ({"engine": {"url": "vllm:8000"}}, "engine.url"),  # no scheme: not what the engine client can reach
        ({"engine": {"url": "http://vllm:99999"}}, "engine.url"),
        ({"engine": {"url": "http://x", "read_timeout_s": -1}}, "engine.read_timeout_s"),
        ({"engine": {"url": "http://x"}, "server": {"port": "eighty"}}, "server.port"),
        ({"engine": {"url": "http://x", "modle": "typo"}}, "engine.modle"),
    ],
)
def test_bad_config_names_the_key(raw, key):
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert f"{key}:" in str(err.value)


def test_cli_refuses_a_bad_config(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("engine:\n  url: http://x\n  timeout: 3\n")
    result = subprocess.run([sys.executable, "-m", "gateway", "serve", "--config", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "engine.timeout" in result.stderr


def test_example_config_loads():
    config = load_config(ROOT / "configs" / "gateway.yaml")
    assert config.engine.url.startswith("http")


def test_vocabulary_is_rebuilt_offline_and_verified(tmp_path, monkeypatch):
    monkeypatch.delenv("TIKTOKEN_ENCODINGS_BASE", raising=False)
    directory = ensure_vocabulary(tmp_path)
    assert hashlib.sha256((directory / VOCAB_FILE).read_bytes()).hexdigest() == VOCAB_SHA256


def test_special_token_ids_match_the_encoding():
    encoding = harmony.encoding()
    for text, token in [
        ("<|return|>", harmony.RETURN),
        ("<|call|>", harmony.CALL),
        ("<|message|>", harmony.MESSAGE),
        ("<|start|>", harmony.START),
        ("<|end|>", harmony.END),
        ("<|channel|>", harmony.CHANNEL),
    ]:
        assert encoding.encode(text, allowed_special="all") == [token]
    assert sorted(encoding.stop_tokens_for_assistant_actions()) == sorted(harmony.STOP_TOKEN_IDS)


def test_reasoning_key_is_checked(tmp_path):
    from gateway.config import ConfigError, load_config

    path = tmp_path / "gateway.yaml"
    path.write_text('engine: {url: "http://e"}\nserver: {reasoning_key: "c2hvcnQ="}\n')
    with pytest.raises(ConfigError, match="32 bytes"):
        load_config(str(path))
    path.write_text('engine: {url: "http://e"}\nserver: {reasoning_key: "' + "A" * 43 + '="}\n')
    assert load_config(str(path)).server.reasoning_key
