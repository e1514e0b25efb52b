"""Agents, sessions and turns as the Agents API shows them (openai 3.57 `Agent`, `AgentSession`, `Turn`), and
the Responses request a session's turn runs as: the door is a translation onto the same runs as every other.

An MCP server's headers and authorization are sealed for the tenant where the agent is kept; what is shown
of them is their names, each value masked. They are opened only to build a run's request."""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..core.sealed import Purpose, Sealer
from ..errors import APIError, bad_request, not_found
from ..storage.agent_store import AgentRecord, SessionRecord
from .models import AgentConfig, AgentTool, AutomationsTool, FunctionTool, McpTool, OtherTool, WebSearchTool
from .wakeup_functions import FUNCTIONS, NAMES

MASK = "********"
SECRETS = "_secrets"  # the body's sealed MCP credentials, by server label: never shown

# What a hosted environment's container gets for its size (the sandbox's own memory limits).
MEMORY = {"small": "1g", "medium": "4g", "large": "16g"}
# Efforts gpt-oss has (low, medium, high): the others mapped to the nearest.
EFFORT = {"none": "low", "minimal": "low", "xhigh": "high", "max": "high"}

BASE_INSTRUCTIONS = (
    "You are an agent working for the user across a session of turns. Use the tools you have to do what is asked, "
    "then answer with what you did and found."
)


def unsupported(what: str, param: str) -> APIError:
    return bad_request(f"{what} is not supported by this gateway.", param=param)


def no_agent(agent_id: str, param: str = "agent_id") -> APIError:
    return not_found(f"No agent found with id '{agent_id}'.", param=param)


def resolved_agent(config: AgentConfig, sealer: Sealer, tenant: str) -> dict[str, Any]:
    """The Agent object's configuration with every default resolved, its MCP credentials sealed apart."""
    if config.multi_agent is not None and config.multi_agent.enabled:
        raise unsupported("multi_agent (subagents)", "multi_agent")
    if config.experimental is not None and config.experimental.time_awareness:
        raise unsupported("experimental.time_awareness", "experimental.time_awareness")
    tools, secrets = persisted_tools(config.tools or [], sealer, tenant)
    text = config.text
    text_format = text.format.model_dump(by_alias=True, exclude_none=True) if text is not None and text.format is not None else {"type": "text"}
    return {
        "name": config.name,
        "instructions": config.instructions,
        "model": config.model,
        "metadata": config.metadata or {},
        "reasoning": {"effort": config.reasoning.effort, "summary": config.reasoning.summary}
        if config.reasoning
        else {"effort": None, "summary": None},
        "text": {"format": text_format, "verbosity": (text.verbosity if text is not None else None) or "medium"},
        "service_tier": config.service_tier or "auto",
        "tools": tools,
        "multi_agent": {"enabled": False, "max_concurrent_subagents": None},
        "compaction": {"async": bool(config.compaction and config.compaction.async_)},
        "experimental": {"time_awareness": False},
        SECRETS: secrets,
    }


def persisted_tools(tools: Sequence[AgentTool], sealer: Sealer, tenant: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    shown: list[dict[str, Any]] = []
    secrets: dict[str, str] = {}
    for index, tool in enumerate(tools):
        param = f"tools[{index}]"
        if isinstance(tool, OtherTool):
            raise unsupported(f"The '{tool.type}' tool", f"{param}.type")
        if isinstance(tool, FunctionTool):
            if tool.defer_loading:
                raise unsupported("defer_loading (tool search)", f"{param}.defer_loading")
            if tool.async_:
                raise unsupported("An async function", f"{param}.async")
            shown.append(
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    "defer_loading": False,
                    "async": False,
                }
            )
        elif isinstance(tool, McpTool):
            shown.append(_mcp(tool, param, sealer, tenant, secrets))
        elif isinstance(tool, AutomationsTool):
            shown.append({"type": "automations"})
        elif isinstance(tool, WebSearchTool):
            location = tool.location.model_dump() if tool.location is not None else None
            shown.append({
                "type": "web_search", "allowed_domains": tool.allowed_domains, "context_size": tool.context_size or "medium",
                "location": location, "mode": tool.mode or "live",
            })  # fmt: skip
    names = [tool.get("name") or tool.get("server_label") for tool in shown if tool["type"] not in ("web_search", "automations")]
    if len(names) != len(set(names)):
        raise bad_request("Tool names and MCP server labels must be unique.", param="tools")
    if any(tool["type"] == "automations" for tool in shown) and NAMES & set(names):
        raise bad_request(f"With the automations tool, no function may be named {', '.join(sorted(NAMES))}.", param="tools")
    return shown, secrets


def _mcp(tool: McpTool, param: str, sealer: Sealer, tenant: str, secrets: dict[str, str]) -> dict[str, Any]:
    transport = tool.transport
    if transport.type != "http":
        raise unsupported("An MCP server over stdio (it runs in a self-hosted environment)", f"{param}.transport.type")
    if tool.connection_origin == "environment":
        raise unsupported("connection_origin 'environment'", f"{param}.connection_origin")
    headers = transport.headers or {}
    if headers or transport.authorization:
        secrets[tool.server_label] = sealer.seal(
            json.dumps({"headers": headers, "authorization": transport.authorization}), Purpose.AGENT_SECRET, tenant
        )
    return {
        "type": "mcp", "server_label": tool.server_label, "allowed_tools": tool.allowed_tools, "connection_origin": "service",
        "credential_id": tool.credential_id, "request_metadata": tool.request_metadata or {}, "required": tool.required,
        "transport": {"type": "http", "server_url": transport.server_url, "headers": {name: MASK for name in headers}},
    }  # fmt: skip


def shown(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key != SECRETS}


def agent_object(record: AgentRecord) -> dict[str, Any]:
    return {"id": record.id, "object": "agent", "created_at": record.created_at, "updated_at": record.updated_at, **shown(record.body)}


def session_object(record: SessionRecord) -> dict[str, Any]:
    body, state = record.body, record.state
    return {
        "id": record.id, "object": "agent.session", "created_at": record.created_at, "last_active_at": record.last_active_at,
        "agent": {"id": record.agent_id, **{key: value for key, value in shown(body["agent"]).items() if key != "metadata"}},
        "environment": body["environment"], "metadata": body["metadata"], "vault_ids": body.get("vault_ids") or [], "review": body.get("review"),
        "prompt_cache_options": body.get("prompt_cache_options"), "status": state.status, "required_actions": state.required_actions,
        "usage": state.usage, "error": state.error,
    }  # fmt: skip


def run_request(session: SessionRecord, input_items: list[dict[str, Any]], sealer: Sealer, tokens: dict[str, str] | None = None) -> dict[str, Any]:
    """The Responses request (as a body) one run of the session's turn is: its agent's model, instructions
    and tools, in the session's conversation, in the background; `tokens` the bearer tokens of the MCP
    servers the session's vaults authorize (vault_use.py), by server label."""
    agent = session.body["agent"]
    tools = [
        _run_tool(tool, agent.get(SECRETS, {}), sealer, session.tenant, tokens or {}) for tool in agent["tools"] if tool["type"] != "automations"
    ]
    if len(tools) < len(agent["tools"]):  # the automations tool: functions the gateway answers itself (wakeups.py)
        tools += FUNCTIONS
    environment = session.body["environment"]
    if environment["type"] == "openai_hosted":
        tools.append(_shell(environment))
    request: dict[str, Any] = {
        "model": agent["model"], "input": input_items, "conversation": session.conversation_id, "background": True, "store": True,
        "instructions": BASE_INSTRUCTIONS + ("\n\n" + agent["instructions"] if agent.get("instructions") else ""),
        "tools": [tool for tool in tools if tool is not None], "text": agent["text"],
    }  # fmt: skip
    reasoning = agent["reasoning"]
    if reasoning["effort"] is not None or reasoning["summary"] is not None:
        effort = reasoning["effort"]
        request["reasoning"] = {"effort": EFFORT.get(effort, effort) if effort else None, "summary": reasoning["summary"]}
    return request


def _run_tool(tool: dict[str, Any], secrets: dict[str, str], sealer: Sealer, tenant: str, tokens: dict[str, str]) -> dict[str, Any] | None:
    if tool["type"] == "function":
        return {"type": "function", "name": tool["name"], "description": tool["description"], "parameters": tool["parameters"], "strict": False}
    if tool["type"] == "mcp":
        run = {
            "type": "mcp",
            "server_label": tool["server_label"],
            "server_url": tool["transport"]["server_url"],
            "allowed_tools": tool["allowed_tools"],
        }
        sealed = secrets.get(tool["server_label"])
        if sealed is not None:
            opened = json.loads(sealer.open(sealed, Purpose.AGENT_SECRET, tenant))
            run["headers"] = opened["headers"] or None
            run["authorization"] = opened["authorization"]
        if tool["server_label"] in tokens and not run.get("authorization"):
            run["authorization"] = tokens[tool["server_label"]]
        return run
    if tool["mode"] == "disabled":
        return None
    search: dict[str, Any] = {"type": "web_search", "search_context_size": tool["context_size"]}
    if tool["allowed_domains"]:
        search["filters"] = {"allowed_domains": tool["allowed_domains"]}
    if tool["location"]:
        search["user_location"] = {"type": "approximate", **{key: value for key, value in tool["location"].items() if value is not None}}
    return search


def _shell(environment: dict[str, Any]) -> dict[str, Any]:
    """A hosted environment is one of the gateway's containers: the shell runs there (environments.py)."""
    return {"type": "shell", "environment": {"type": "container_reference", "container_id": environment["id"]}}
