"""The dialog's state is each tool's own part (`Dialog.tool_state`): read from the stored state when a tool
asks, written back in the same keys; a part no tool of a response read is stored again as it was, so a
response without the browser (say) keeps a conversation's pages for the next one that has it."""

from __future__ import annotations

from gateway.responses.history.dialog import Dialog
from gateway.responses.tools.containers import ContainerState
from gateway.responses.tools.loaded import LoadedTools
from gateway.responses.tools.mcp_history import McpState, PendingApproval
from gateway.responses.tools.web_search import BrowserState

STORED = {
    "container_id": "cntr_1",
    "mcp_listed": ["deepwiki"],
    "pending_approvals": {
        "mcpr_1": {"server_label": "deepwiki", "name": "ask", "arguments": "{}", "recipient": "deepwiki.ask", "channel": "commentary"}
    },
    "answered": {"call_1": "digest"},
    "session_key": "sess_1",
    "browser_pages": [{"url": "https://example.com", "title": "Example"}],
    "thread": None,
    "loaded_tools": [{"type": "function", "name": "lookup"}],
}


def test_a_part_no_tool_read_is_stored_again_as_it_was() -> None:
    dialog = Dialog.from_json([], {}, STORED)
    state = dialog.state()
    for key in ("container_id", "mcp_listed", "pending_approvals", "browser_pages", "loaded_tools", "answered", "session_key"):
        assert state[key] == STORED[key], key


def test_each_part_reads_and_writes_its_own_keys() -> None:
    dialog = Dialog.from_json([], {}, STORED)
    assert dialog.tool_state(ContainerState).container_id == "cntr_1"
    assert dialog.tool_state(BrowserState).pages == STORED["browser_pages"]
    assert dialog.tool_state(LoadedTools).recipients == {"functions.lookup"}
    mcp = dialog.tool_state(McpState)
    assert mcp.pending_approvals["mcpr_1"] == PendingApproval("deepwiki", "ask", "{}", "deepwiki.ask", "commentary")
    mcp.listed.append("time")
    dialog.tool_state(ContainerState).container_id = "cntr_2"
    state = dialog.state()
    assert state["mcp_listed"] == ["deepwiki", "time"] and state["container_id"] == "cntr_2"
    assert state["pending_approvals"] == STORED["pending_approvals"]
    # Read again, the same part: one object per dialog.
    assert dialog.tool_state(McpState) is mcp


def test_a_copy_goes_on_apart() -> None:
    dialog = Dialog.from_json([], {}, STORED)
    dialog.tool_state(McpState).listed.append("time")
    copy = dialog.copy()
    copy.tool_state(McpState).listed.append("weather")
    copy.tool_state(BrowserState).pages.append(None)  # read first in the copy: from the stored state, apart
    assert dialog.tool_state(McpState).listed == ["deepwiki", "time"]
    assert dialog.tool_state(BrowserState).pages == STORED["browser_pages"]
    assert copy.state()["mcp_listed"] == ["deepwiki", "time", "weather"]
