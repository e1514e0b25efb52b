"""The tools the gateway runs itself for one response: `python` in the sandbox, the browser, MCP servers.

`HostedTools` declares them to the model (Harmony namespaces in the system message), claims the
model's calls to them by recipient, runs the calls, and reports each one as output items and events.
The run loop (run.py) asks it at three points: when a call's header arrives (`open_call`), when the
call's message is complete (`call_written`), and after the engine stopped at `<|call|>` (`run_call`).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Callable

import anyio

from sandbox.manager import describe_python_tool
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from tools.connection import ToolCallFailed
from tools.results import result_text
from tools.browser.session import ACTIONS, Browser, BrowseOptions
from tools.servers import EnabledServer, ServerRefused, schema_for_model, tool_listing

from ..errors import APIError, bad_request
from ..files.service import check_memory_limit
from ..files.sync import ContainerSync, open_container
from ..harmony import ToolDescription, ToolNamespaceConfig
from .conversation import Dialog, PendingApproval, tool_result
from .items import Event, Events, OutputItem
from .log import Batch
from .python_call import run_code
from .services import Services
from .tool_call import CallKind, ToolCall
from .request import CodeInterpreterTool, McpTool, ResponsesRequest, WebSearchTool
from .tool_items import CodeInterpreterCallOutput, McpApprovalRequestOutput, McpCallOutput, McpListToolsOutput, WebSearchCallOutput

log = logging.getLogger("gateway.tools")

VIEW_CHARS = {"low": 2000, "medium": 4000, "high": 8000}  # search_context_size: how much of a page a view shows

Emit = Callable[[Batch], None]  # appends a batch of events to the response's log


class HostedTools:
    def __init__(
        self, services: Services, request: ResponsesRequest, tenant: str, output: list[OutputItem], events: Events, emit: Emit
    ) -> None:
        self.services = services
        self.emit = emit
        self.request = request
        self.tenant = tenant
        self.output = output
        self.events = events
        self.code_interpreter = next((t for t in request.tools if isinstance(t, CodeInterpreterTool)), None)
        self.servers: dict[str, EnabledServer] = {}
        self._to_list: list[EnabledServer] = []
        self.calls_made = 0  # bounded by max_tool_calls
        self.show_code_outputs = request.includes("code_interpreter_call.outputs") or services.config.server.always_include_code_outputs
        self.dialog = Dialog()
        self.web_search = next((t for t in request.tools if isinstance(t, WebSearchTool)), None)
        self.browser: Browser | None = None  # made in prepare(), from the conversation's pages
        # The code_interpreter's container: its id from prepare(); its record once code runs in it (an
        # auto container is made then), with what its files are.
        self.container_id: str | None = None
        self.container: ContainerSync | None = None
        self._container_replaced = False

    @property
    def enabled(self) -> bool:
        return self.request.tool_choice != "none"

    # -- before the first event ----------------------------------------------------------------------------

    async def prepare(self, dialog: Dialog, provision: bool = True) -> None:
        """Check the request's hosted tools and connect its MCP servers; errors here are HTTP errors.
        Without `provision` (a prompt only counted) no container is made and no file copied."""
        self.dialog = dialog
        await self._check_python(provision)
        self._open_browser()
        mcp_tools = [(index, tool) for index, tool in enumerate(self.request.tools) if isinstance(tool, McpTool)]
        registry = self.services.mcp
        for index, tool in mcp_tools:
            if tool.server_label in self.servers:
                raise bad_request(f"Two mcp tools are labelled '{tool.server_label}'.", param=f"tools[{index}].server_label")
            try:
                server = await registry.enable(tool, index, self.tenant)
            except ServerRefused as exc:
                code = "rate_limit_exceeded" if exc.status == 429 else "invalid_value"
                raise APIError(exc.status, exc.message, param=exc.param, code=code) from None
            self.servers[tool.server_label] = server
            if tool.server_label not in dialog.mcp_listed or not server.connection.connected:
                self._to_list.append(server)
        for decision in dialog.decisions:
            if decision.pending.server_label not in self.servers:
                raise bad_request(
                    f"The approval response {decision.approval_request_id} is for the MCP server "
                    f"'{decision.pending.server_label}', which is not in this request's tools.",
                    param="tools",
                )

    async def _check_python(self, provision: bool) -> None:
        """The container the code will run in: the one named, or (auto) the conversation's, or a new one;
        the auto container's `file_ids` are copied into it now."""
        tool = self.code_interpreter
        if tool is None:
            return
        sandbox, files = self.services.sandbox, self.services.files
        index = self.request.tools.index(tool)
        if sandbox is None:
            raise bad_request(
                "The code_interpreter tool is not enabled on this gateway (no sandbox is configured).",
                param=f"tools[{index}].type",
            )
        named = tool.container
        if not isinstance(named, str):
            check_memory_limit(named.memory_limit, sandbox.config.memory, f"tools[{index}].container.memory_limit")
        self.container, self.container_id, self._container_replaced = await open_container(
            files, named, f"tools[{index}].container", self.tenant, self.dialog.container_id, provision
        )

    def _open_browser(self) -> None:
        backends, tool = self.services.browser, self.web_search
        if tool is None or backends is None:  # a request's web_search without a browser was refused before
            return
        options = BrowseOptions(
            view_chars=VIEW_CHARS[tool.search_context_size or "medium"],
            max_results=backends.config.max_results,
            page_budget=backends.config.pages_per_response,
            allowed_domains=tool.domains(),
            location=tool.user_location.describe() if tool.user_location else None,
        )
        self.browser = Browser(backends.search, backends.fetcher, options, self.dialog.browser_pages)

    def container_file(self, path: str) -> dict[str, Any] | None:
        """A `container_file_citation` (without its indices) for a file of the container the answer links
        to (`sandbox:/mnt/data/PATH`); None if the container has no such file."""
        found = self.container.by_path.get(path) if self.container is not None else None
        if found is None:
            return None
        return {"type": "container_file_citation", "container_id": found.container_id, "file_id": found.id, "filename": found.filename}

    def cited(self, cursor: int, line: int) -> tuple[str, str] | None:
        """What a citation in the model's answer points to (citations.py); None without a browser."""
        return self.browser.cited(cursor, line) if self.browser is not None else None

    @property
    def has_work_before_engine(self) -> bool:
        return bool(self._to_list or self.dialog.decisions)

    def namespaces(self) -> list[ToolNamespaceConfig]:
        if not self.enabled:
            return []
        namespaces = []
        if self.browser is not None:  # declared as gpt-oss was trained: the stock description, before python
            namespaces.append(ToolNamespaceConfig.browser())
        sandbox = self.services.sandbox
        if self.code_interpreter is not None and sandbox is not None:
            known = list(self.container.by_path) if self.container is not None else []
            description = describe_python_tool(sandbox.config, sandbox.backend.data_dir, known)
            namespaces.append(ToolNamespaceConfig(name="python", description=description, tools=[]))
        for label, server in self.servers.items():
            if not server.connection.connected:
                continue
            tools = [
                ToolDescription.new(t.name, t.description or "", parameters=schema_for_model(t.input_schema))
                for t in server.tools()
            ]
            description = server.description or server.connection.instructions or f"Tools of the {label} server."
            namespaces.append(ToolNamespaceConfig(name=label, description=description, tools=tools))
        return namespaces

    # -- before the first engine call: listings, and the calls the user approved or denied --------------------

    async def before_engine(self) -> None:
        for server in self._to_list:
            item = McpListToolsOutput(len(self.output), server.label)
            self.output.append(item)
            error = None if server.connection.connected else f"MCP server unavailable: {server.connection.error}"
            listing = [tool_listing(tool) for tool in server.tools()] if error is None else []
            if error is None and server.label not in self.dialog.mcp_listed:
                self.dialog.mcp_listed.append(server.label)
            self.emit([*item.listed(self.events, listing, error)])
        decisions, self.dialog.decisions = self.dialog.decisions, []
        for decision in decisions:
            pending = decision.pending
            if not decision.approve:
                reason = f" Reason: {decision.reason}" if decision.reason else ""
                self.dialog.append(tool_result(pending.recipient, pending.channel, f"The user denied this call.{reason}"))
                continue
            server = self.servers[pending.server_label]
            approved = McpCallOutput(len(self.output), pending.server_label, pending.name, decision.approval_request_id)
            self.output.append(approved)
            self.dialog.owner = approved.id
            call = ToolCall(pending.recipient, pending.channel, CallKind.MCP, approved, server, pending.name)
            self.emit([*approved.opened(self.events), approved.delta(self.events, pending.arguments), *approved.written(self.events)])
            await self.run_call(call)
            self.dialog.append(tool_result(call.recipient, call.channel, call.output or ""))

    # -- the model's calls ----------------------------------------------------------------------------------

    def open_call(self, index: int, call: ToolCall) -> OutputItem | None:
        """Claim a call to a hosted tool when its header arrives; return its item, if one streams."""
        recipient = call.recipient
        label, _, name = recipient.partition(".")
        server = self.servers.get(label) if self.enabled else None
        is_python = recipient == "python" and self.code_interpreter is not None and self.enabled
        is_browser = label == "browser" and self.browser is not None and self.enabled
        if is_browser and name not in ACTIONS:
            call.refuse(f"the browser has no function '{name}'; use browser.search, browser.open or browser.find.")
            return None
        if not is_python and not is_browser and server is None:
            call.refuse(f"there is no tool '{recipient}'. Use only the tools declared to you.")
            return None
        if server is not None and not (server.connection.connected and server.has_tool(name)):
            state = "is unavailable" if not server.connection.connected else f"has no tool named '{name}'"
            call.refuse(f"the '{label}' server {state}.")
            return None
        limit = self.request.max_tool_calls
        if limit is not None and self.calls_made >= limit:
            call.refuse(f"the limit of {limit} tool calls for this response is reached. Answer without tools.")
            return None
        self.calls_made += 1
        if is_browser:
            call.tool_name = name
            sources = self.request.includes("web_search_call.action.sources")
            return call.claim(CallKind.BROWSER, WebSearchCallOutput(index, name, sources))
        if is_python:
            return call.claim(CallKind.PYTHON, CodeInterpreterCallOutput(index, self.container_id or "", self.show_code_outputs))
        assert server is not None
        call.server, call.tool_name = server, name
        if server.needs_approval(name):
            return call.claim(CallKind.APPROVAL)  # no item until the arguments are complete
        return call.claim(CallKind.MCP, McpCallOutput(index, label, name))

    def call_written(self, call: ToolCall, arguments: str) -> list[Event]:
        """The call's message is complete (the engine stopped at `<|call|>`)."""
        item = call.item
        call.arguments = arguments
        if isinstance(item, WebSearchCallOutput):
            return item.running(self.events)
        if call.kind in (CallKind.MCP, CallKind.APPROVAL) and not _is_json_object(arguments):
            call.invalidate("the arguments are not a valid JSON object. Call the tool again with a JSON object.")
            if isinstance(item, McpCallOutput):
                item.error = protocol_error(INVALID_PARAMS, "The arguments are not a valid JSON object.")
                return item.written(self.events) + item.finished(self.events, "failed")
            return []
        if call.kind is CallKind.APPROVAL:
            assert call.server is not None
            request = McpApprovalRequestOutput(len(self.output), call.server.label, call.tool_name, arguments)
            self.output.append(request)
            self.dialog.claim(len(self.dialog.messages) - 1, request.id)  # the call's message, just appended
            self.dialog.pending_approvals[request.id] = PendingApproval(
                call.server.label, call.tool_name, arguments, call.recipient, call.channel or "commentary"
            )
            return request.announced(self.events)
        if isinstance(item, (CodeInterpreterCallOutput, McpCallOutput)):
            return item.written(self.events)  # open while it runs
        return []

    async def run_call(self, call: ToolCall) -> None:
        """Run a claimed call; its output (or error) is left in `call.output` for the model."""
        started = time.perf_counter()
        await self._run(call)
        item = call.item
        outcome = getattr(item, "status", "failed")
        self.services.metrics.tool_call(call.kind.value, outcome, time.perf_counter() - started)

    async def _run(self, call: ToolCall) -> None:
        if call.kind is CallKind.PYTHON:
            await self._run_python(call)
        elif call.kind is CallKind.MCP:
            await self._run_mcp(call)
        elif call.kind is CallKind.BROWSER:
            await self._run_browser(call)

    async def _run_browser(self, call: ToolCall) -> None:
        item, browser = call.item, self.browser
        assert isinstance(item, WebSearchCallOutput) and browser is not None  # claimed only with a browser
        outcome = await browser.call(call.tool_name, call.arguments)
        self.dialog.browser_pages = browser.summaries()
        call.output = outcome.text
        self.emit([*item.finished(self.events, outcome.action, outcome.sources, outcome.failed)])

    async def _run_python(self, call: ToolCall) -> None:
        item, sandbox = call.item, self.services.sandbox
        assert isinstance(item, CodeInterpreterCallOutput) and sandbox is not None  # claimed only with a sandbox
        # The conversation ran code in this container (or in one that expired): a session started anew lost its state.
        resumed = self.dialog.container_id == item.container_id or self._container_replaced
        if self.container is None:
            container = await self.services.files.new_container(self.tenant, "auto", container_id=item.container_id)
            self.container = ContainerSync(self.services.files, container, [])
        result = await run_code(sandbox, item, resumed, self.tenant, self.container)
        self.dialog.container_id = item.container_id
        call.output = result.text
        item.outputs = result.outputs
        self.emit([*item.finished(self.events, result.status)])

    async def _run_mcp(self, call: ToolCall) -> None:
        item, server = call.item, call.server
        assert isinstance(item, McpCallOutput) and server is not None
        try:
            result = await server.connection.call(call.tool_name, json.loads(item.text))
            text = result_text(result)
            if result.is_error:  # the tool ran and reported a failure
                content = [block.model_dump(mode="json", exclude_none=True) for block in result.content]
                item.error = {"type": "mcp_tool_execution_error", "content": content}
                text = f"Error: {text or 'the tool reported an error.'}"
            else:
                item.output = text
        except ToolCallFailed as exc:
            item.error, text = protocol_error(exc.code, str(exc)), f"Error: {exc}"
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # a fault in the SDK or the server's answer: the call failed, the response goes on
            log.exception("MCP call %s.%s failed", item.server_label, item.name)
            item.error = protocol_error(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
            text = f"Error: the call failed ({type(exc).__name__})."
        call.output = text
        self.emit([*item.finished(self.events, "failed" if item.error else "completed")])


def protocol_error(code: int, message: str) -> dict[str, Any]:
    """An `mcp_call.error` for a call that did not produce a tool result."""
    return {"type": "mcp_protocol_error", "code": code, "message": message}


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False

