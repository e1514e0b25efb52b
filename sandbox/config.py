"""The `sandbox:` section of the gateway's config: the python tool's sandbox (its backends read it)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    # Labels this gateway's containers so that a restart removes its own orphans and nobody else's.
    instance: str = Field("default", pattern=r"^[A-Za-z0-9_.-]+$")
