"""What every section of the configuration is: a model that refuses keys it does not know."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigError(Exception):
    pass


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")
