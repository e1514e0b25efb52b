"""Hosted environments: each one of this gateway's containers (the same id, the same files, the same network
policy through the egress proxy), made for a session, from a template, or on their own
(`POST /v1/agents/environments`), with the files they start with; and environment templates, configurations
kept to make environments from. A session's shell runs in its environment's container."""

from __future__ import annotations

import base64
import binascii
import shlex
import time
from typing import Any, Literal

from pydantic import Field

from runtime.cpu import run_cpu
from sandbox.manager import BACKEND_ERRORS, SandboxFull, SessionNotFound, ShellCommand

from ..core.ids import new_id
from ..core.models import StrictModel
from ..errors import APIError, bad_request, not_found
from ..files.network import NetworkAllowlist, checked_policy
from ..files.service import check_memory_limit
from ..files.sync import open_container
from ..storage.environment_store import Kept
from ..storage.file_store import Container, ContainerFile, TooMany
from .models import EnvironmentFile, FileByID, HostedEnvironment, InlineFile, Network, SetupCommand
from .needs import AgentsNeeds
from .objects import MEMORY, unsupported
from .vault_use import domain_secrets

WORKSPACE = "/workspace/"  # where the Agents API puts files; the sandbox's /mnt/data


class TemplateConfig(StrictModel):
    """`environments.templates.create`/`update`: what an environment made from it gets."""

    name: str | None = Field(None, max_length=256)
    network: Network | None = None
    files: list[EnvironmentFile] | None = Field(None, max_length=100)
    container_size: Literal["small", "medium", "large"] | None = None
    capability_directories: list[str] | None = None
    desktop: dict[str, Any] | None = None
    env: dict[str, str] | None = None
    packages: dict[str, Any] | None = None
    plugins: list[dict[str, Any]] | None = None
    setup_commands: list[SetupCommand] | None = Field(None, max_length=32)
    skills: list[dict[str, Any]] | None = None


def refuse_unsupported(config: StrictModel, param: str) -> None:
    """What this gateway's environments cannot do yet, refused by name (`param` the settings' own path)."""

    def at(name: str) -> str:
        return f"{param}.{name}" if param else name

    for name in ("capability_directories", "desktop", "env", "plugins", "skills"):
        if getattr(config, name, None):
            raise unsupported(at(name), at(name))
    packages = getattr(config, "packages", None)
    if packages and any(dict(packages if isinstance(packages, dict) else packages.model_dump()).values()):
        raise unsupported(at("packages") + " (install them with the shell)", at("packages"))
    network = getattr(config, "network", None)
    if network is not None and network.access == "enabled":
        raise unsupported("Unrestricted network access (use 'restricted' with allowed_domains)", at("network.access"))
    if network is not None and network.blocked_domains:
        raise unsupported(at("network.blocked_domains"), at("network.blocked_domains"))


def decoded(data: str) -> bytes:
    return base64.b64decode(data, validate=True)


def relative(path: str, param: str) -> str:
    """A workspace path as the container's file path (relative to its /mnt/data)."""
    inside = path.removeprefix(WORKSPACE) if path.startswith("/") else path
    parts = inside.split("/")
    if path.startswith("/") and not path.startswith(WORKSPACE) or any(part in ("", ".", "..") for part in parts):
        raise bad_request(f"A file's path must be inside {WORKSPACE}, without '.' or '..' parts.", param=param)
    return inside


async def provision(
    services: AgentsNeeds, tenant: str, asked: HostedEnvironment, param: str = "environment", vault_ids: list[str] | None = None
) -> Kept:
    """The environment a session (or `environments.create`) asks for: the one it names, or a new one from its
    template and its own settings, its files copied in, its vaults' environment-variable credentials its
    domain secrets."""
    store = services.agent_environments
    if asked.environment_id is not None:
        if asked.environment_template_id is not None or asked.files or asked.network or asked.container_size:
            raise bad_request("An existing environment_id takes no other settings.", param=f"{param}.environment_id")
        found = await store.get(asked.environment_id, tenant)
        if found is None:
            raise not_found(f"No environment found with id '{asked.environment_id}'.", param=f"{param}.environment_id")
        await services.files.container(found.id, tenant, param=f"{param}.environment_id")  # a 400 once it expired
        return found
    refuse_unsupported(asked, param)
    settings: dict[str, Any] = {}
    if asked.environment_template_id is not None:
        template = await services.agent_templates.get(asked.environment_template_id, tenant)
        if template is None:
            raise not_found(f"No environment template found with id '{asked.environment_template_id}'.", param=f"{param}.environment_template_id")
        settings = dict(template.body)
    given = asked.model_dump(exclude_none=True, include={"network", "container_size", "files", "setup_commands"})
    settings.update(given)
    return await _make(services, tenant, TemplateConfig.model_validate(settings), param, vault_ids or [])


async def _make(services: AgentsNeeds, tenant: str, config: TemplateConfig, param: str, vault_ids: list[str]) -> Kept:
    sandbox = services.sandbox
    if sandbox is None:
        raise bad_request("Hosted environments need the sandbox, which this gateway does not have.", param=f"{param}.type")
    size = config.container_size or "small"
    memory = MEMORY[size]
    check_memory_limit(memory, sandbox.config.memory, f"{param}.container_size")
    network = config.network
    allowlist = None
    if network is not None and network.access == "restricted":
        if not network.allowed_domains:
            raise bad_request("'restricted' network access needs allowed_domains.", param=f"{param}.network.allowed_domains")
        secrets = await domain_secrets(services, tenant, vault_ids, [domain.lower() for domain in network.allowed_domains])
        asked = NetworkAllowlist(type="allowlist", allowed_domains=network.allowed_domains, domain_secrets=secrets or None)
        allowlist = checked_policy(asked, sandbox.config.network, f"{param}.network")
    container = await services.files.new_container(tenant, "agent environment", memory_limit=memory, network=allowlist)
    try:
        files = [await add_file(services, container, file, f"{param}.files[{index}]") for index, file in enumerate(config.files or [])]
        await set_up(services, container, config.setup_commands or [], f"{param}.setup_commands")
        now = int(time.time())
        shown_network = {"access": "restricted" if allowlist else "disabled", "allowed_domains": list(allowlist.allowed_domains) if allowlist else []}
        kept = Kept(container.id, tenant, now, now, {"container_size": size, "network": shown_network, "files": files})
        await services.agent_environments.create(kept, services.config.agents.max_environments_per_tenant)
    except TooMany as exc:
        await services.files.delete_container(container.id, tenant)
        raise bad_request(f"This gateway keeps at most {exc.limit} agent environments per project.", code="too_many_environments") from None
    except BaseException:
        await services.files.delete_container(container.id, tenant)
        raise
    return kept


async def add_file(services: AgentsNeeds, container: Container, file: FileByID | InlineFile, param: str) -> dict[str, Any]:
    """One of an environment's files, put in its container; as the environment shows it."""
    path = relative(file.path, f"{param}.path")
    files = services.files
    if isinstance(file, FileByID):
        upload = await files.file(file.file_id, container.tenant, param=f"{param}.file_id")
        blob = await files.blobs.copy(upload.blob)
        record = ContainerFile(new_id("cfile"), container.id, container.tenant, path, upload.bytes, "user", int(time.time()), blob, upload.id)
    else:
        try:
            data = await run_cpu(decoded, file.data)
        except (binascii.Error, ValueError):
            raise bad_request("data must be standard base64.", param=f"{param}.data") from None
        writer = files.blobs.writer()
        try:
            await writer.write(data)
            blob = await writer.commit()
        except BaseException:
            await writer.abort()
            raise
        record = ContainerFile(new_id("cfile"), container.id, container.tenant, path, len(data), "user", int(time.time()), blob)
    added = await files.put(record, param=param)
    shown: dict[str, Any] = {"id": added.id, "type": file.type, "path": WORKSPACE + path, "size_bytes": added.bytes}
    if isinstance(file, FileByID):
        shown["file_id"] = file.file_id
    return shown


async def set_up(services: AgentsNeeds, container: Container, commands: list[SetupCommand], param: str) -> None:
    """The environment's setup commands, run once in its container as it is made, one after another (what they
    write in the workspace is the environment's); one failing fails the creation. Their output is not shown:
    setup commands are confidential."""
    sandbox = services.sandbox
    if not commands or sandbox is None:
        return
    sync, _, _ = await open_container(services.files, container.id, param, container.tenant, None)
    for index, setup in enumerate(commands):
        where = (
            shlex.quote("/mnt/data/" + relative(setup.cwd, f"{param}[{index}].cwd"))
            if setup.cwd and setup.cwd.rstrip("/") != WORKSPACE.rstrip("/")
            else "/mnt/data"
        )
        try:
            (ended,) = await sandbox.shell(
                container.id, [ShellCommand(f"cd {where} && {setup.command}")], container.tenant, lambda index, output: None,
                files=sync, idle_ttl_s=container.idle_minutes * 60, network=services.files.network_grant(container),
            )  # fmt: skip
        except (SandboxFull, SessionNotFound, *BACKEND_ERRORS) as exc:
            raise APIError(
                503, f"The environment's sandbox could not run its setup commands: {exc}", type="server_error", code="sandbox_error"
            ) from None
        if ended.exit_code != 0:
            outcome = f"exit code {ended.exit_code}" if ended.exit_code is not None else "timed out"
            raise bad_request(f"Setup command {index} failed ({outcome}).", param=f"{param}[{index}].command")


def environment_info(kept: Kept, status: str) -> dict[str, Any]:
    return {
        "id": kept.id,
        "object": "agent.environment",
        "type": "openai_hosted",
        "status": status,
        "files": kept.body["files"],
        "plugins": [],
        "skills": [],
    }


def session_environment(kept: Kept) -> dict[str, Any]:
    """The environment as a session shows it (`AgentSession.environment`)."""
    body = kept.body
    return {
        "type": "openai_hosted", "id": kept.id, "capability_directories": [], "files": body["files"], "network": body["network"],
        "packages": {"npm": [], "python": [], "system": []}, "plugins": [], "skills": [], "container_size": body["container_size"], "desktop": None,
    }  # fmt: skip


def template_object(kept: Kept) -> dict[str, Any]:
    body = kept.body
    network = body.get("network") or {"access": "disabled", "allowed_domains": []}
    files = [_template_file(file) for file in body.get("files") or []]
    return {
        "id": kept.id, "object": "agent.environment.template", "created_at": kept.created_at, "updated_at": kept.updated_at,
        "name": body.get("name"), "network": {"access": network["access"], "allowed_domains": network.get("allowed_domains") or []},
        "files": files, "packages": {"npm": [], "python": [], "system": []}, "plugins": [], "skills": [], "capability_directories": [], "desktop": None,
    }  # fmt: skip


def _template_file(file: dict[str, Any]) -> dict[str, Any]:
    if file["type"] == "file_id":
        return {"type": "file_id", "file_id": file["file_id"], "path": file["path"]}
    data = file["data"]  # standard base64, checked when the template was kept: its length tells the size exactly
    return {"type": "inline", "path": file["path"], "size_bytes": len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))}


async def checked_template(config: TemplateConfig) -> dict[str, Any]:
    """A template's configuration as kept: what an environment made from it could not do is refused now."""
    refuse_unsupported(config, "")
    for index, file in enumerate(config.files or []):
        relative(file.path, f"files[{index}].path")
        if isinstance(file, InlineFile):
            try:
                await run_cpu(decoded, file.data)
            except (binascii.Error, ValueError):
                raise bad_request("data must be standard base64.", param=f"files[{index}].data") from None
    return config.model_dump(exclude_none=True)
