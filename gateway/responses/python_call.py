"""Running a `python` call in the sandbox: what the client's item shows and what the model reads."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sandbox.manager import BACKEND_ERRORS, Execution, SandboxFull, SandboxManager, SessionNotFound

from ..files.sync import ContainerSync
from .tool_items import CodeInterpreterCallOutput

log = logging.getLogger("gateway.python")

STATE_LOST = "[The Python session was restarted: variables, imports and files from earlier calls are gone.]"


@dataclass
class PythonResult:
    status: str  # the item's: completed | failed
    outputs: list[dict[str, Any]]  # the item's outputs: logs, then images
    text: str  # the tool message the model reads


async def run_code(sandbox: SandboxManager, item: CodeInterpreterCallOutput, resumed: bool, tenant: str, container: ContainerSync) -> PythonResult:
    """Run the call's code in its container's session, with the container's files in /mnt/data."""
    idle_ttl_s = container.container.idle_minutes * 60
    try:
        execution = await sandbox.execute(item.container_id, item.text, resumed, tenant, files=container, idle_ttl_s=idle_ttl_s)
    except SandboxFull as exc:
        return _failed(f"Error: {exc}.")
    except SessionNotFound:
        return _failed(f"Error: container '{item.container_id}' was not found.")
    except BACKEND_ERRORS as exc:  # the backend could not start a kernel: report it, keep the response alive
        log.exception("sandbox failure in session %s", item.container_id)
        return _failed(f"Error: the Python sandbox could not run the code ({exc}).")
    return _result(execution, container.take_notes())


def _result(execution: Execution, notes: list[str]) -> PythonResult:
    lines = [STATE_LOST] if execution.state_lost else []
    lines.append(execution.output.rstrip("\n") if execution.output.strip() else "[no output]")
    lines += notes
    if execution.images:
        lines.append(f"[{len(execution.images)} image(s) shown to the user]")
    text = "\n".join(lines)
    outputs: list[dict[str, Any]] = [{"type": "logs", "logs": text}]
    outputs += [{"type": "image", "url": f"data:image/png;base64,{image}"} for image in execution.images]
    return PythonResult("failed" if execution.status == "restarted" else "completed", outputs, text)


def _failed(text: str) -> PythonResult:
    return PythonResult("failed", [{"type": "logs", "logs": text}], text)
