"""The gateway installs as users install it: `python3 -m venv v && v/bin/pip install .` with the pip that
Python ships (not upgraded), then starts and serves. A dependency declared only through an extra that an
old pip resolves to nothing (trafilatura's `lxml[html_clean]` under lxml 6 with pip 23) would install a
gateway that dies at start-up; this catches it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from .conftest import MODEL, ROOT, Process, free_port, gateway_config


@pytest.mark.timeout(900)
def test_a_stock_pip_install_starts_and_serves(emulator: Process, tmp_path: Path) -> None:
    import yaml

    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run([str(venv / "bin" / "pip"), "--version"], check=True, capture_output=True, text=True).stdout
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(ROOT)], capture_output=True, text=True, timeout=840)
    assert installed.returncode == 0, f"{pip}\n{installed.stdout[-2000:]}\n{installed.stderr[-3000:]}"
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(gateway_config(emulator.url, tmp_path, browser={"allow_networks": ["127.0.0.1/32"]})))
    port = free_port()
    # The venv's own entry point: its sys.path holds the installed package, not the checkout.
    server = Process([str(venv / "bin" / "gateway"), "serve", "--config", str(config), "--port", str(port)], port, "/health", tmp_path / "gw.log")
    try:
        server.start()
        answer = httpx.post(f"{server.url}/v1/responses", json={"model": MODEL, "input": "hi", "tools": [{"type": "web_search"}]}, timeout=30)
        assert answer.status_code == 200, answer.text
        imported = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import lxml.html.clean, connectors.browser.backends, gateway.app"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert imported.returncode == 0, imported.stderr[-2000:]
    finally:
        server.stop()
