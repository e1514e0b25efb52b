"""Vaults' and credentials' request bodies, field for field as openai 3.57 types them (`vault_create_params`,
`credential_create_params`, `credential_auth_create_param`, `credential_auth_rotate_param`). Secret fields are
write-only: kept sealed, never shown."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from ..core.models import Metadata, StrictModel

Secret = Annotated[str, Field(min_length=1, max_length=8192)]
Url = Annotated[str, Field(min_length=1, max_length=2048)]


class VaultCreate(StrictModel):
    name: str | None = Field(None, max_length=256)
    metadata: Metadata | None = None


class VaultUpdate(StrictModel):
    name: str | None = Field(None, max_length=256)
    metadata: Metadata | None = None


class EndpointAuthNone(StrictModel):
    type: Literal["none"]


class EndpointAuthSecret(StrictModel):
    type: Literal["client_secret_basic", "client_secret_post"]
    client_secret: Secret


EndpointAuth = Annotated[Union[EndpointAuthNone, EndpointAuthSecret], Field(discriminator="type")]


class OAuthRefresh(StrictModel):
    client_id: str = Field(min_length=1, max_length=512)
    refresh_token: Secret
    token_endpoint: Url
    token_endpoint_auth: EndpointAuth
    resource: str | None = Field(None, max_length=2048)
    scope: str | None = Field(None, max_length=2048)


class McpOAuth(StrictModel):
    type: Literal["mcp_oauth"]
    access_token: Secret
    mcp_server_url: Url
    expires_at: str | None = Field(None, max_length=64)
    refresh: OAuthRefresh | None = None


class StaticBearer(StrictModel):
    type: Literal["static_bearer"]
    token: Secret
    mcp_server_url: Url


class Unrestricted(StrictModel):
    type: Literal["unrestricted"]


class Limited(StrictModel):
    type: Literal["limited"]
    allowed_hosts: list[Annotated[str, Field(min_length=1, max_length=253)]] = Field(min_length=1, max_length=16)


Networking = Annotated[Union[Unrestricted, Limited], Field(discriminator="type")]


class EnvironmentVariable(StrictModel):
    type: Literal["environment_variable"]
    secret_name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    secret_value: Secret
    networking: Networking


Auth = Annotated[Union[McpOAuth, StaticBearer, EnvironmentVariable], Field(discriminator="type")]


class CredentialCreate(StrictModel):
    name: str = Field(min_length=1, max_length=256)
    auth: Auth
    metadata: Metadata | None = None


class EndpointAuthRotate(StrictModel):
    type: Literal["client_secret_basic", "client_secret_post"]
    client_secret: Secret | None = None


class OAuthRefreshRotate(StrictModel):
    refresh_token: Secret | None = None
    scope: str | None = Field(None, max_length=2048)
    token_endpoint_auth: EndpointAuthRotate | None = None


class McpOAuthRotate(StrictModel):
    type: Literal["mcp_oauth"]
    access_token: Secret | None = None
    expires_at: str | None = Field(None, max_length=64)
    refresh: OAuthRefreshRotate | None = None


class StaticBearerRotate(StrictModel):
    type: Literal["static_bearer"]
    token: Secret


class EnvironmentVariableRotate(StrictModel):
    type: Literal["environment_variable"]
    secret_value: Secret


AuthRotate = Annotated[Union[McpOAuthRotate, StaticBearerRotate, EnvironmentVariableRotate], Field(discriminator="type")]


class CredentialUpdate(StrictModel):
    auth: AuthRotate | None = None
    metadata: Metadata | None = None
