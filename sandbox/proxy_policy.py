"""What the Docker socket proxy lets through, decided on parsed requests, never on raw bytes.

Docker decodes bodies with Go's JSON decoder, which matches keys case-insensitively and merges
duplicate objects, so a check that reads a body as Python sees it is not a check of what Docker does.
The proxy therefore never forwards a client's body or query: it parses them strictly (no duplicate
keys, no two keys that differ only in case), accepts exactly the fields the gateway itself sends, each
within bounds, and builds the request it forwards from those values alone.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

LABEL = "harmony-gateway.sandbox"
LABEL_PREFIX = "harmony-gateway."
MAX_BODY = 64 * 1024  # the gateway's create body is under 1 KiB

_VERSION = re.compile(r"^/v1\.\d{1,3}(?=/)")
_CONTAINER_REF = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"
_CONTAINER_ACTION = re.compile(rf"^/containers/({_CONTAINER_REF})(?:/(start|attach|json|wait|kill))?$")
_TARGET_CHARS = re.compile(r"^/[A-Za-z0-9/._~:%?=&+,-]*$")
_FLAG = {"0", "1", "true", "false", "True", "False"}
_TMPFS_PATHS = {"/tmp", "/mnt/data", "/mnt/skills"}  # where a sandbox writes (docker_backend.py)
_SIZE = re.compile(r"^(\d{1,12})([kmg]?)$")
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


_BUILTIN_NETWORKS = {"none", "host", "bridge", "default"}
_ENV_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}=[^\0]{0,8192}")
MAX_ENV = 64


class Refused(Exception):
    """The request is not one the sandbox needs: answered 403 and never sent to Docker."""


@dataclass(frozen=True)
class Limits:
    """The proxy's own bounds on what a sandbox container may ask for."""

    image: str
    max_memory: int = 8 * 1024**3
    max_pids: int = 4096
    max_cpus: float = 16.0
    max_tmpfs: int = 4 * 1024**3
    network: str | None = None  # the egress network sandboxes with a network policy join (README), if any
    runtime: str | None = None  # the one Docker runtime containers run under (e.g. runsc), if not the default

    def __post_init__(self) -> None:
        if self.network is not None and (self.network in _BUILTIN_NETWORKS or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", self.network)):
            raise ValueError(f"the sandbox network must be a user-defined network of its own, not {self.network!r}")


@dataclass(frozen=True)
class Upstream:
    """A request the proxy builds to send to Docker; `container` is checked to be a sandbox first."""

    method: str
    target: str
    body: bytes = b""
    container: str | None = None  # the client's reference, resolved to a full id before sending
    upgrade: bool = False  # attach: the connection becomes the container's raw stream after a 101

    def for_container(self, container_id: str) -> "Upstream":
        assert self.container is not None
        target = self.target.replace("{id}", container_id)
        return Upstream(self.method, target, self.body, None, self.upgrade)


def plan(method: str, target: str, body: bytes, limits: Limits, upgrade_requested: bool) -> Upstream:
    """The request to send to Docker for a client's request, or Refused."""
    if not _TARGET_CHARS.match(target):
        raise Refused("the request target has characters Docker's API does not use")
    parts = urlsplit(target)
    version = _VERSION.match(parts.path)
    prefix = version.group(0) if version else ""
    path = unquote(parts.path[len(prefix) :])
    query = _query(parts.query)

    def request(path_out: str, params: dict[str, str] | None = None, **kwargs: Any) -> Upstream:
        suffix = f"?{urlencode(params)}" if params else ""
        return Upstream(method, prefix + path_out + suffix, **kwargs)

    if body and not (method == "POST" and path == "/containers/create"):
        raise Refused(f"{method} {path} takes no body")
    if upgrade_requested and not (method == "POST" and path.endswith("/attach")):
        raise Refused("only attach may upgrade the connection")
    if (method, path) in (("GET", "/_ping"), ("HEAD", "/_ping"), ("GET", "/version")):
        _only(query, set(), path)
        return request(path)
    if method == "GET" and path == f"/images/{limits.image}/json":
        _only(query, set(), path)
        return request(f"/images/{quote(limits.image, safe='/:')}/json")
    if method == "GET" and path == "/containers/json":
        return request(path, _listing_query(query))
    if method == "POST" and path == "/containers/create":
        params = _only(query, {"name"}, path)
        if "name" in params and not re.fullmatch(_CONTAINER_REF, params["name"]):
            raise Refused("container create: a bad name")
        return request(path, params, body=json.dumps(create_body(parse_json(body), limits)).encode())
    match = _CONTAINER_ACTION.match(path)
    if match is None:
        raise Refused(f"{method} {path}")
    reference, action = match.group(1), match.group(2)
    expected, allowed = _ACTIONS[action]
    if method != expected:
        raise Refused(f"{method} {path}")
    params = _only(query, set(allowed), path)
    for key, value in params.items():
        if not allowed[key].fullmatch(value):
            raise Refused(f"{path}: bad value for {key}")
    if action == "attach" and not upgrade_requested:
        raise Refused("attach must ask to upgrade the connection")
    path_out = "/containers/{id}" + (f"/{action}" if action else "")
    return request(path_out, params, container=reference, upgrade=action == "attach")


_FLAG_VALUE = re.compile("|".join(_FLAG))
_ACTIONS: dict[str | None, tuple[str, dict[str, re.Pattern[str]]]] = {
    None: ("DELETE", {"force": _FLAG_VALUE, "v": _FLAG_VALUE, "link": re.compile("0|false|False")}),
    "start": ("POST", {}),
    "attach": ("POST", {key: _FLAG_VALUE for key in ("stdin", "stdout", "stderr", "stream", "logs")}),
    "json": ("GET", {"size": _FLAG_VALUE}),
    "wait": ("POST", {"condition": re.compile("not-running|next-exit|removed")}),
    "kill": ("POST", {"signal": re.compile("[A-Z0-9]{1,12}")}),
}


def _query(raw: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=bool(raw))
    except ValueError:
        raise Refused("the query string is malformed") from None
    params: dict[str, str] = {}
    for key, value in pairs:
        if key in params:
            raise Refused(f"the query parameter {key!r} is repeated")
        params[key] = value
    return params


def _only(params: dict[str, str], allowed: set[str], path: str) -> dict[str, str]:
    extra = sorted(set(params) - allowed)
    if extra:
        raise Refused(f"{path}: query parameter(s) not allowed: {', '.join(extra)}")
    return params


def _listing_query(params: dict[str, str]) -> dict[str, str]:
    """Listing containers: only with a filter on the sandbox label, rebuilt from its parsed form."""
    _only(params, {"all", "filters", "limit", "size", "trunc_cmd"}, "/containers/json")
    filters = parse_json(params.get("filters", "{}").encode())
    labels = filters.get("label") if isinstance(filters, dict) else None
    if not isinstance(labels, list) or f"{LABEL}=1" not in labels:
        raise Refused("listing containers needs a filter on the sandbox label")
    if set(filters) != {"label"} or not all(isinstance(label, str) and len(label) < 256 for label in labels):
        raise Refused("listing containers: only label filters are allowed")
    out = {"filters": json.dumps({"label": labels})}
    for key in ("all", "size", "trunc_cmd"):
        if key in params:
            if params[key] not in _FLAG:
                raise Refused(f"/containers/json: bad value for {key}")
            out[key] = params[key]
    if "limit" in params:
        if not re.fullmatch(r"-?\d{1,6}", params["limit"]):
            raise Refused("/containers/json: bad value for limit")
        out["limit"] = params["limit"]
    return out


# -- JSON as Docker would read it ---------------------------------------------------------------------------


def parse_json(raw: bytes) -> Any:
    """Strict JSON: one value, no duplicate keys, no keys that differ only in case, no NaN."""
    if len(raw) > MAX_BODY:
        raise Refused("the body is too large")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            folded = key.casefold()
            if folded in seen:
                raise Refused(f"the key {key!r} appears twice (keys are compared without case)")
            seen.add(folded)
        return dict(items)

    def no_constant(name: str) -> Any:
        raise Refused(f"{name} is not JSON")

    try:
        return json.loads(raw or b"{}", object_pairs_hook=pairs, parse_constant=no_constant)
    except (ValueError, RecursionError):
        raise Refused("the body is not valid JSON") from None


def _fields(spec: Any, where: str, allowed: set[str], must_be_null: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """The object's fields, checked against the exact spelling of the allowed ones."""
    if not isinstance(spec, dict):
        raise Refused(f"{where} must be an object")
    spelled = {name.casefold(): name for name in allowed | must_be_null}
    for key, value in spec.items():
        proper = spelled.get(key.casefold())
        if proper is None:
            raise Refused(f"{where}: the field {key!r} is not allowed")
        if proper != key:
            raise Refused(f"{where}: the field {key!r} must be spelled {proper!r}")
        if key in must_be_null and value is not None:
            raise Refused(f"{where}: the field {key!r} is not allowed")
    return {key: value for key, value in spec.items() if key in allowed}


_CONFIG_FIELDS = {"Image", "User", "Labels", "NetworkDisabled", "HostConfig", "Tty", "OpenStdin", "StdinOnce",
                  "AttachStdin", "AttachStdout", "AttachStderr", "Env"}  # fmt: skip
# What the docker SDK always sends, as null when unused: accepted only as null.
_CONFIG_NULLS = {"Hostname", "Domainname", "ExposedPorts", "Cmd", "Volumes", "Entrypoint", "WorkingDir",
                 "NetworkingConfig", "MacAddress", "StopSignal", "Healthcheck", "StopTimeout", "Runtime"}  # fmt: skip
_HOST_FIELDS = {"NetworkMode", "ReadonlyRootfs", "CapDrop", "SecurityOpt", "Memory", "MemorySwap", "PidsLimit",
                "NanoCpus", "Init", "LogConfig", "Tmpfs", "Runtime"}  # fmt: skip


def create_body(spec: Any, limits: Limits) -> dict[str, Any]:
    """The create body to send Docker: the allowed fields of `spec`, checked, and nothing else."""
    config = _fields(spec, "container", _CONFIG_FIELDS, _CONFIG_NULLS)
    problems: list[str] = []

    def need(condition: bool, problem: str) -> None:
        if not condition:
            problems.append(problem)

    need(config.get("Image") == limits.image, f"image must be {limits.image}")
    user = _user(config.get("User"))
    need(user is not None, "the user must be a numeric uid:gid other than root")
    labels = config.get("Labels")
    need(
        isinstance(labels, dict)
        and labels.get(LABEL) == "1"
        and len(labels) <= 8
        and all(isinstance(k, str) and k.startswith(LABEL_PREFIX) and isinstance(v, str) and len(v) <= 128 for k, v in labels.items()),
        "the sandbox label is missing, or another label is set",
    )
    host = _fields(config.get("HostConfig"), "HostConfig", _HOST_FIELDS)
    # No network, or the egress network alone (its only way out is the egress proxy): never host, bridge,
    # another network or another container's.
    networked = limits.network is not None and host.get("NetworkMode") == limits.network
    need(host.get("NetworkMode") == "none" or networked, "network must be none" + (f" or {limits.network}" if limits.network else ""))
    need(config.get("NetworkDisabled") in ((None, False) if networked else (True,)), "NetworkDisabled must match the network mode")
    env = config.get("Env")
    need(
        env is None or (isinstance(env, list) and len(env) <= MAX_ENV and all(isinstance(e, str) and _ENV_ENTRY.fullmatch(e) for e in env)),
        f"Env: at most {MAX_ENV} NAME=value entries",
    )
    need(host.get("Runtime") == limits.runtime, f"the runtime must be {limits.runtime}" if limits.runtime else "no runtime may be named")
    need(config.get("Tty") in (None, False), "no tty")
    for flag in ("OpenStdin", "StdinOnce", "AttachStdin", "AttachStdout", "AttachStderr"):
        need(config.get(flag) in (None, True, False), f"{flag} must be a boolean")

    need(host.get("ReadonlyRootfs") is True, "the root file system must be read-only")
    need(host.get("CapDrop") == ["ALL"], "every capability must be dropped")
    need(
        host.get("SecurityOpt") in (["no-new-privileges"], ["no-new-privileges:true"]), "no-new-privileges is required, and no other security option"
    )
    memory = host.get("Memory")
    need(_int_in(memory, 1, limits.max_memory), f"a memory limit of at most {limits.max_memory} bytes is required")
    need(host.get("MemorySwap") == memory, "MemorySwap must equal Memory (no swap)")
    need(_int_in(host.get("PidsLimit"), 1, limits.max_pids), f"a pids limit of 1 to {limits.max_pids} is required")
    cpus = host.get("NanoCpus")
    need(cpus is None or _int_in(cpus, 1, int(limits.max_cpus * 1e9)), f"at most {limits.max_cpus:g} CPUs")
    need(host.get("Init") in (None, True, False), "Init must be a boolean")
    log_config = host.get("LogConfig")
    need(log_config is None or log_config == {"Type": "none", "Config": {}}, "container logs must be off")
    tmpfs = _tmpfs(host.get("Tmpfs"), limits)
    need(tmpfs is not None, "tmpfs mounts: only /tmp, /mnt/data and /mnt/skills, nosuid and nodev, with a size")
    if problems:
        raise Refused("container create: " + "; ".join(problems))

    host_out: dict[str, Any] = {
        "NetworkMode": limits.network if networked else "none",
        "ReadonlyRootfs": True,
        "CapDrop": ["ALL"],
        "SecurityOpt": ["no-new-privileges"],
        "Privileged": False,
        "Memory": memory,
        "MemorySwap": memory,
        "PidsLimit": host["PidsLimit"],
        "Init": bool(host.get("Init")),
        "LogConfig": {"Type": "none", "Config": {}},
        "Tmpfs": tmpfs,
    }
    if cpus is not None:
        host_out["NanoCpus"] = cpus
    if limits.runtime is not None:
        host_out["Runtime"] = limits.runtime
    return {
        "Image": limits.image,
        "User": user,
        "Labels": dict(labels),  # type: ignore[arg-type]
        "NetworkDisabled": not networked,
        **({"Env": list(env)} if env else {}),
        "Tty": False,
        "OpenStdin": bool(config.get("OpenStdin")),
        "StdinOnce": bool(config.get("StdinOnce")),
        "AttachStdin": bool(config.get("AttachStdin")),
        "AttachStdout": bool(config.get("AttachStdout")),
        "AttachStderr": bool(config.get("AttachStderr")),
        "HostConfig": host_out,
    }


def _int_in(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _user(value: Any) -> str | None:
    """`uid` or `uid:gid`, numeric and not 0 (however written: "00", "0000:0")."""
    if not isinstance(value, str) or not re.fullmatch(r"\d{1,9}(:\d{1,9})?", value):
        return None
    uid, _, gid = value.partition(":")
    ids = (int(uid), int(gid or uid))
    return f"{ids[0]}:{ids[1]}" if 0 not in ids else None


def _tmpfs(value: Any, limits: Limits) -> dict[str, str] | None:
    if value is None:
        return {}
    if not isinstance(value, dict) or not set(value) <= _TMPFS_PATHS:
        return None
    out, total = {}, 0
    for path, options in value.items():
        if not isinstance(options, str):
            return None
        parsed: dict[str, str] = {}
        for option in options.split(","):
            name, _, argument = option.partition("=")
            if name in parsed:
                return None
            parsed[name] = argument
        if not set(parsed) <= {"rw", "nosuid", "nodev", "noexec", "size", "mode"}:
            return None  # exec, suid, dev, uid=0, …
        if not {"nosuid", "nodev", "size"} <= set(parsed) or any(parsed[f] for f in ("rw", "nosuid", "nodev", "noexec") if f in parsed):
            return None
        size = _SIZE.match(parsed["size"])
        if size is None or ("mode" in parsed and not re.fullmatch(r"[0-7]{3,4}", parsed["mode"])):
            return None
        total += int(size.group(1)) * _UNITS[size.group(2)]
        flags = [flag for flag in ("rw", "nosuid", "nodev", "noexec") if flag in parsed]
        out[path] = ",".join(flags + [f"size={parsed['size']}"] + ([f"mode={parsed['mode']}"] if "mode" in parsed else []))
    return out if total <= limits.max_tmpfs else None
