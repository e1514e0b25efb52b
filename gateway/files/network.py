"""Containers' network policies, as openai 3.57 types them (`network_policy` on containers.create, the
shell's `container_auto`, code_interpreter's `auto` container): checked against the operator's bounds
(`sandbox.network`), stored with the container (each secret's value sealed, bound to its tenant; the
container object shows its domains alone: file_store.py), and opened into the grant its sandbox gets (sandbox/network.py)."""

from __future__ import annotations

import json
import secrets
from typing import Annotated, Literal, Union

from pydantic import Field

from runtime.domains import domain_problem, matches
from sandbox.config import SandboxNetwork
from sandbox.network import DomainSecret, NetworkAccess, NetworkGrant

from ..core.models import StrictModel
from ..core.sealed import Purpose, Sealer
from ..errors import bad_request

# Names a secret's placeholder may not take: what sends the sandbox's traffic to the proxy and makes it
# trust the proxy, and what changes how programs run.
_RESERVED = {"PATH", "HOME", "USER", "SHELL", "PWD", "NO_PROXY", "EGRESS_CA_PEM", "SSL_CERT_FILE", "SSL_CERT_DIR",
             "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS",
             "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "FTP_PROXY"}  # fmt: skip
_RESERVED_PREFIXES = ("LD_", "PYTHON", "GIT_", "NODE_", "PIP_", "MPL", "BASH_")


class DomainSecretParam(StrictModel):
    domain: str = Field(min_length=1, max_length=253)
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    value: str = Field(min_length=1, max_length=8192)


class NetworkDisabled(StrictModel):
    type: Literal["disabled"]


class NetworkAllowlist(StrictModel):
    type: Literal["allowlist"]
    allowed_domains: list[Annotated[str, Field(min_length=1, max_length=255)]] = Field(min_length=1, max_length=256)
    domain_secrets: list[DomainSecretParam] | None = Field(None, max_length=64)


NetworkPolicy = Annotated[Union[NetworkDisabled, NetworkAllowlist], Field(discriminator="type")]


def checked_policy(policy: NetworkDisabled | NetworkAllowlist | None, config: SandboxNetwork, param: str) -> NetworkAllowlist | None:
    """The allowlist a request asks for, its domains in lower case, once the operator's bounds allow it
    (a 400 naming what does not); None for no network."""
    if not isinstance(policy, NetworkAllowlist):
        return None
    if not config.enabled:
        raise bad_request("Sandboxes on this gateway have no network: the network policy 'allowlist' is not available.", param=f"{param}.type")
    if len(policy.allowed_domains) > config.max_domains:
        raise bad_request(f"allowed_domains may list {config.max_domains} domains at most on this gateway.", param=f"{param}.allowed_domains")
    domains = []
    for index, given in enumerate(policy.allowed_domains):
        domain, where = given.lower().removesuffix("."), f"{param}.allowed_domains[{index}]"
        problem = domain_problem(domain)
        if problem is not None:
            raise bad_request(f"'{given[:100]}' {problem}.", param=where)
        if not _permitted(domain, config):
            raise bad_request(f"'{domain}' may not be allowed on this gateway (sandbox.network's allow and deny lists).", param=where)
        domains.append(domain)
    found = policy.domain_secrets or []
    if found and not config.domain_secrets:
        raise bad_request("Domain secrets are turned off on this gateway.", param=f"{param}.domain_secrets")
    if len(found) > config.max_secrets:
        raise bad_request(f"domain_secrets may hold {config.max_secrets} secrets at most on this gateway.", param=f"{param}.domain_secrets")
    names: dict[str, str] = {}  # a name given again must hold the same value (one secret for several domains)
    kept = []
    for index, secret in enumerate(found):
        where, domain = f"{param}.domain_secrets[{index}]", secret.domain.lower().removesuffix(".")
        if domain_problem(domain) is not None or not (domain in domains or any(matches(domain, allowed) for allowed in domains)):
            raise bad_request(f"The secret's domain '{secret.domain[:100]}' must be one of allowed_domains.", param=f"{where}.domain")
        if names.get(secret.name, secret.value) != secret.value or reserved_name(secret.name):
            raise bad_request(f"'{secret.name}' cannot name a secret (it is reserved, or named twice with another value).", param=f"{where}.name")
        if not (secret.value.isascii() and secret.value.isprintable()):
            raise bad_request("A secret's value must be printable ASCII (it goes into an HTTP header).", param=f"{where}.value")
        names[secret.name] = secret.value
        kept.append(DomainSecretParam(domain=domain, name=secret.name, value=secret.value))
    return NetworkAllowlist(type="allowlist", allowed_domains=domains, domain_secrets=kept or None)


def reserved_name(name: str) -> bool:
    """Whether a secret's placeholder may not take this environment variable's name."""
    return name.upper() in _RESERVED or name.upper().startswith(_RESERVED_PREFIXES)


def _permitted(domain: str, config: SandboxNetwork) -> bool:
    """Whether the operator lets a tenant allow `domain`: under an entry of `allow` (when there is one), and
    touching no entry of `deny` (a wildcard that would reach a denied name is refused whole)."""
    if any(_covers(denied, domain) or _covers(domain, denied) for denied in config.deny):
        return False
    return config.allow is None or any(_covers(allowed, domain) for allowed in config.allow)


def _covers(outer: str, inner: str) -> bool:
    """Whether every name `inner` allows, `outer` allows too."""
    if inner.startswith("*."):
        return outer.startswith("*.") and (inner[2:] == outer[2:] or inner[2:].endswith(outer[1:]))
    return matches(inner, outer)


def sealed_policy(policy: NetworkAllowlist | None, sealer: Sealer, tenant: str) -> str | None:
    """What the store keeps: the domains, and each secret's name, placeholder and sealed value."""
    if policy is None:
        return None
    given = policy.domain_secrets or []
    placeholders = {s.name: f"hgsecret_{secrets.token_hex(16)}" for s in given}  # one per variable, whatever its domains
    kept = [
        {"domain": s.domain, "name": s.name, "placeholder": placeholders[s.name], "sealed": sealer.seal(s.value, Purpose.DOMAIN_SECRET, tenant)}
        for s in given
    ]
    return json.dumps({"type": "allowlist", "allowed_domains": policy.allowed_domains, "domain_secrets": kept})


def grant_of(stored: str | None, sealer: Sealer, tenant: str) -> NetworkGrant | None:
    """The grant a container's sandbox gets: its secrets opened (raises Unsealable for a blob not its tenant's)."""
    if stored is None:
        return None
    policy = json.loads(stored)
    opened = tuple(
        DomainSecret(s["domain"], s["name"], s["placeholder"], sealer.open(s["sealed"], Purpose.DOMAIN_SECRET, tenant))
        for s in policy["domain_secrets"]
    )
    return NetworkGrant(tenant, tuple(policy["allowed_domains"]), opened)


def access_of(stored: str | None) -> NetworkAccess | None:
    """What a stored policy lets the sandbox reach, and its secrets' names (for the model), opening nothing."""
    if stored is None:
        return None
    policy = json.loads(stored)
    return NetworkAccess(tuple(policy["allowed_domains"]), tuple(dict.fromkeys(secret["name"] for secret in policy["domain_secrets"])))
