"""The `sandbox:` section of the gateway's config: the python tool's sandbox (its backends read it)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SandboxNetwork(_Section):
    """Sandboxes with a network policy (README: "Network policies and domain secrets"): they join
    `docker_network`, an internal Docker network whose only way out is the egress proxy (egress/). Off by
    default: every sandbox has no network at all."""

    enabled: bool = False
    docker_network: str = Field("harmony-egress", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    proxy_url: str = Field("http://egress:3128", description="The proxy as sandboxes reach it")
    control_url: str = Field("http://egress:8081", description="The proxy's control API, as the gateway reaches it")
    control_key: str | None = Field(None, min_length=16, description="Default: the EGRESS_CONTROL_KEY environment variable")
    control_key_file: str | None = Field(None, description="Or a file holding it (compose.yaml: the egress proxy makes it)")
    allow: list[str] | None = Field(None, description="Domains a tenant may allow (None: any); `*.example.com` covers names under it")
    deny: list[str] = Field([], description="Domains no tenant may allow")
    domain_secrets: bool = True
    max_domains: int = Field(64, ge=1, le=256)
    max_secrets: int = Field(16, ge=0, le=64)
    max_connections: int = Field(32, ge=1, description="Open connections per sandbox")
    max_bytes: int = Field(4 * 1024**3, ge=1024, description="Bytes a sandbox may move through the proxy in its life")
    max_connection_s: float = Field(600.0, gt=0)
    timeout_s: float = Field(5.0, gt=0, description="For each call to the control API")


class SandboxConfig(_Section):
    """The Python tool's sandbox. `local` runs the kernel in Linux namespaces instead of containers: weaker
    isolation, for machines without Docker."""

    backend: Literal["docker", "local"] = "docker"
    image: str = "harmony-gateway/sandbox:latest"
    timeout_s: float = Field(30.0, gt=0, description="Per execution; stated to the model")
    memory: str = Field("1g", pattern=r"^\d+[kmg]?$", description="Memory limit, no extra swap")
    cpus: float = Field(1.0, gt=0)
    pids: int = Field(128, gt=8)
    pool_size: int = Field(2, ge=0, description="Started sessions kept ready")
    idle_ttl_s: float = Field(900.0, gt=0)
    max_sessions: int = Field(32, gt=0)
    max_sessions_per_tenant: int = Field(8, gt=0, description="Live sessions one tenant may hold")
    max_output_bytes: int = Field(16384, ge=1024, description="Past this, output is cut around a marker")
    local_python: str | None = Field(None, description="Interpreter of the local backend; default the system python3")
    local_uid_base: int = Field(200_000, ge=1000, description="local backend as root: each session gets a host uid from here")
    runtime: Annotated[str | None, BeforeValidator(lambda value: value or None)] = Field(
        None, pattern=r"^[a-z][a-z0-9_.-]{0,31}$", description="A Docker runtime, e.g. runsc (gVisor)"
    )
    network: SandboxNetwork = SandboxNetwork()
    # Labels this gateway's containers so that a restart removes its own orphans and nobody else's.
    instance: str = Field("default", pattern=r"^[A-Za-z0-9_.-]+$")

    @model_validator(mode="after")
    def _network_needs_docker(self) -> "SandboxConfig":
        if self.network.enabled and self.backend != "docker":
            raise ValueError("sandbox.network needs the docker backend: the local backend's sandboxes have no network")
        if self.runtime is not None and self.backend != "docker":
            raise ValueError("sandbox.runtime is a Docker runtime: it needs the docker backend")
        return self
