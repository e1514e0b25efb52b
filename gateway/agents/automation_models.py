"""The automations' request bodies, field for field as openai 3.57 types them (`automation_create_params`,
`automation_update_params`, `automation_target_param`)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from ..core.models import Metadata, StrictModel
from .models import AgentConfig, Environment, InputMessage

Name = Annotated[str, Field(min_length=1, max_length=256)]
Expression = Annotated[str, Field(min_length=1, max_length=256)]
Timezone = Annotated[str, Field(min_length=1, max_length=64)]


class NewSessionTarget(StrictModel):
    """Each invocation makes a session and sends it the input."""

    type: Literal["new_session"]
    environment: Environment
    input: list[InputMessage] = Field(min_length=1, max_length=16)
    agent: AgentConfig | None = None
    agent_id: str | None = Field(None, max_length=128)
    metadata: Metadata | None = None
    vault_ids: list[str] | None = Field(None, max_length=10)


class ExistingSessionTarget(StrictModel):
    """Each invocation sends the session the instructions, as a message, once it is idle."""

    type: Literal["existing_session"]
    session_id: str = Field(min_length=1, max_length=128)
    instructions: str = Field(min_length=1, max_length=32_000)


Target = Annotated[Union[NewSessionTarget, ExistingSessionTarget], Field(discriminator="type")]


class AutomationCreate(StrictModel):
    """`periodic` (expression and timezone) or `once` (run_at): which of them is required is checked by type."""

    type: Literal["periodic", "once"]
    name: Name
    target: Target
    expression: Expression | None = None
    timezone: Timezone | None = None
    run_at: int | None = Field(None, ge=0, lt=1 << 40)
    metadata: Metadata | None = None


class AutomationUpdate(StrictModel):
    name: Name | None = None
    expression: Expression | None = None
    timezone: Timezone | None = None
    run_at: int | None = Field(None, ge=0, lt=1 << 40)
    target: Target | None = None
    metadata: Metadata | None = None
