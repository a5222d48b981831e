"""Where ``--validate`` gets the ACP schema, and which revision that is.

Source order (the first that applies wins):

1. A schema file named by ``ACP_FAST_VALIDATE_SCHEMA`` (the CLI's
   ``--validate-schema PATH`` sets it): the protocol's own ``schema.json`` or
   ``schema.unstable.json``. A directory is taken as a package that bundles
   them (``@agentclientprotocol/sdk`` ships ``schema/v1/``) or as the folder
   that holds them; there the unstable file is preferred.
2. The installed Python SDK (``agent-client-protocol``): its pydantic models
   emit JSON Schema, as before schema files were read.

There is no search of the file system: what a runtime checks against should
not depend on the working directory or on a test folder. The file is data read
at run time, once per process and path.

Why the unstable file when a directory is given: it is a superset of the
stable one (the stable methods, kinds and fields plus the unstable ones), and
the check runs on what the agent writes. An agent writes an unstable kind
only if it implements that unstable feature, so the superset flags nothing
a stable-only agent writes, while the stable file would report every
unstable message as unknown. The validator is installed per connection
before anything says which methods the agent serves; who wants the stable
verdict names ``schema.json`` itself.

From a schema file the method tables come from the file: each definition the
``AgentRequest`` / ``AgentNotification`` / ``AgentResponse`` unions name
carries its method in ``x-method``, and the protocol-level messages
(``$/cancel_request``) sit in the document's top-level ``anyOf``. The SDK's
models carry no method, so that path keeps a table of model names, narrowed
to the models the installed release has.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from ..extras import install_hint

SCHEMA_ENV_VAR = "ACP_FAST_VALIDATE_SCHEMA"

#: Where a directory may hold the schema, best first: the unstable superset,
#: protocol version 1 (the one acp_fast speaks), as the npm SDK or the ACP repository lays it out.
DIRECTORY_CANDIDATES = (
    "schema/v1/schema.unstable.json",
    "v1/schema.unstable.json",
    "schema.unstable.json",
    "schema/v1/schema.json",
    "v1/schema.json",
    "schema.json",
)

# The SDK path's tables. The SDK generates its models from schema.json and keeps
# the definition names, so these are the schema's names; entries the installed
# release lacks are dropped when it is loaded.

#: SDK path: agent -> client requests, method -> the SDK model of its params.
SDK_REQUEST_PARAMS = {
    "session/request_permission": "RequestPermissionRequest",
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
    "terminal/create": "CreateTerminalRequest",
    "terminal/output": "TerminalOutputRequest",
    "terminal/wait_for_exit": "WaitForTerminalExitRequest",
    "terminal/kill": "KillTerminalRequest",
    "terminal/release": "ReleaseTerminalRequest",
    "elicitation/create": "CreateElicitationRequest",
    "mcp/connect": "ConnectMcpRequest",
    "mcp/message": "MessageMcpRequest",
    "mcp/disconnect": "DisconnectMcpRequest",
}

#: SDK path: agent -> client notifications, method -> the SDK model of its params.
SDK_NOTIFICATION_PARAMS = {
    "session/update": "SessionNotification",
    "elicitation/complete": "CompleteElicitationNotification",
    "mcp/message": "MessageMcpNotification",
    "auth/status_update": "AuthStatusUpdateNotification",
    "$/cancel_request": "CancelRequestNotification",
}

#: SDK path: client -> agent requests, method -> the SDK model of the agent's result.
#: ``mcp/message`` is absent on purpose: its result is the inner MCP result, any JSON.
SDK_RESULTS = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "logout": "LogoutResponse",
    "auth/status": "AuthStatusResponse",
    "providers/list": "ListProvidersResponse",
    "providers/set": "SetProviderResponse",
    "providers/disable": "DisableProviderResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/resume": "ResumeSessionResponse",
    "session/fork": "ForkSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/delete": "DeleteSessionResponse",
    "session/archive": "ArchiveSessionResponse",
    "session/unarchive": "UnarchiveSessionResponse",
    "session/status": "SessionStatusResponse",
    "session/set_title": "SetSessionTitleResponse",
    "session/close": "CloseSessionResponse",
    "session/set_mode": "SetSessionModeResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    "session/prompt": "PromptResponse",
    "mcp/connect": "ConnectMcpResponse",
    "mcp/disconnect": "DisconnectMcpResponse",
}

ERROR_DEF = "Error"


@dataclass(frozen=True, eq=False)  # hashed by identity: validators are cached per loaded schema
class Schema:
    """One ACP schema as JSON Schema ``$defs``, with the definition that checks each agent message."""

    source: Literal["file", "python-sdk"]
    revision: str  # what a person needs to name it: package and version, file, digest
    defs: dict[str, Any]
    requests: dict[str, str]  # agent -> client request method -> definition of its params
    notifications: dict[str, str]  # agent -> client notification method -> definition of its params
    results: dict[str, str]  # client -> agent request method -> definition of the agent's result


def configured_path() -> str | None:
    """The schema file or directory the environment names, or None for the SDK's models."""
    return os.environ.get(SCHEMA_ENV_VAR) or None


def resolve(path: str | os.PathLike[str]) -> Path:
    """The schema file ``path`` names: itself, or the best candidate inside a directory."""
    p = Path(path).expanduser()
    if p.is_dir():
        for candidate in DIRECTORY_CANDIDATES:
            if (p / candidate).is_file():
                return (p / candidate).resolve()
        raise FileNotFoundError(f"{p}: no ACP schema in it (looked for {', '.join(DIRECTORY_CANDIDATES)})")
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such schema file")
    return p.resolve()


def load(path: str | None = None) -> Schema:
    """The schema ``path`` names, else the one the environment names, else the SDK's (see the module docstring)."""
    path = path or configured_path()
    if path is not None:
        return load_file(str(resolve(path)))
    return load_sdk()


def unavailable(path: str | None = None) -> str | None:
    """Why the configured schema cannot be used here, or None if it can (loads and caches it)."""
    path = path or configured_path()
    missing = _missing(path)
    if missing:
        return missing
    try:
        load(path)
    except (OSError, ValueError) as exc:  # orjson.JSONDecodeError is a ValueError
        return f"{SCHEMA_ENV_VAR}: {exc}" if path else str(exc)
    return None


def describe(path: str | None = None) -> str:
    """The schema ``--validate`` would use, in one line, without loading it (for ``--version``)."""
    path = path or configured_path()
    missing = _missing(path)
    if path is not None:
        try:
            text = f"{file_revision(resolve(path))} (from {SCHEMA_ENV_VAR})"
        except OSError as exc:
            return f"unusable {SCHEMA_ENV_VAR}: {exc}"
    else:
        text = f"{sdk_revision()} (set {SCHEMA_ENV_VAR} to use a schema file)"
    return f"{text}; {missing}" if missing else text


def _missing(path: str | None) -> str | None:
    """What validation from ``path`` (a file, or None: the SDK) needs and this environment lacks."""
    needed = ("jsonschema",) if path else ("jsonschema", "acp")
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    return f"needs {' and '.join(missing)}: {install_hint('validate')}" if missing else None


# -- a schema file ------------------------------------------------------------------


@functools.cache
def load_file(path: str) -> Schema:
    """A schema file's definitions and method tables (cached: one parse per process and path)."""
    data = Path(path).read_bytes()
    document = orjson.loads(data)
    defs = document.get("$defs") if isinstance(document, dict) else None
    unions = ("AgentRequest", "AgentNotification", "AgentResponse")
    if not isinstance(defs, dict) or not all(name in defs for name in unions) or ERROR_DEF not in defs:
        raise ValueError(f"{path}: not an ACP schema file (needs $defs {', '.join(unions)} and {ERROR_DEF})")
    notifications = _by_method(defs, defs["AgentNotification"].get("properties", {}).get("params"))
    for message in document.get("anyOf", ()):  # protocol-level messages either side may send
        props = message.get("properties", {}) if isinstance(message, dict) else {}
        if "id" not in props:
            for method, name in _by_method(defs, props.get("params")).items():
                notifications.setdefault(method, name)
    return Schema(
        source="file",
        revision=file_revision(Path(path), data),
        defs=defs,
        requests=_by_method(defs, defs["AgentRequest"].get("properties", {}).get("params")),
        notifications=notifications,
        results=_by_method(defs, defs["AgentResponse"]),
    )


def _by_method(defs: dict[str, Any], node: Any) -> dict[str, str]:
    """method -> definition, for each definition ``node`` refers to that names its method."""
    found: dict[str, str] = {}
    for name in _refs(node):
        method = defs.get(name, {}).get("x-method")
        if isinstance(method, str):
            found.setdefault(method, name)
    return found


def _refs(node: Any) -> list[str]:
    """The local definitions a subtree refers to, in order (references are not followed)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        own = [ref.removeprefix("#/$defs/")] if isinstance(ref, str) and ref.startswith("#/$defs/") else []
        return own + [name for value in node.values() for name in _refs(value)]
    if isinstance(node, list):
        return [name for value in node for name in _refs(value)]
    return []


def file_revision(path: Path, data: bytes | None = None) -> str:
    """Package and version that ship ``path`` (if any), the file, its protocol version, its digest.

    A schema file carries no release number; the package around it does: the
    npm SDK's ``package.json``, or the ``Cargo.toml`` version marker next to the
    schema in the ACP repository. ``meta.json`` beside it gives the protocol version.
    """
    import hashlib  # here, not at import: the server imports this module whether or not it validates

    if data is None:
        data = path.read_bytes()
    parts = []
    package = _package_of(path)
    if package is not None:
        name, version, root = package
        parts.append(f"{name} {version}: {path.relative_to(root)}")
    else:
        parts.append(str(path))
    protocol = _protocol_version(path)
    if protocol is not None:
        parts.append(f"protocol version {protocol}")
    parts.append(f"sha256 {hashlib.sha256(data).hexdigest()[:12]}")
    return ", ".join(parts)


def _package_of(path: Path) -> tuple[str, str, Path] | None:
    import tomllib
    for folder in list(path.parents)[:3]:
        manifest = folder / "package.json"
        if manifest.is_file():
            try:
                meta = orjson.loads(manifest.read_bytes())
            except orjson.JSONDecodeError:
                continue
            if isinstance(meta, dict) and isinstance(meta.get("name"), str) and isinstance(meta.get("version"), str):
                return meta["name"], meta["version"], folder
        cargo = folder / "Cargo.toml"
        if cargo.is_file():
            try:
                package = tomllib.loads(cargo.read_text()).get("package", {})
            except (tomllib.TOMLDecodeError, UnicodeDecodeError):
                continue
            if isinstance(package.get("name"), str) and isinstance(package.get("version"), str):
                return package["name"], package["version"], folder
    return None


def _protocol_version(path: Path) -> int | None:
    meta = path.with_name(path.name.replace("schema", "meta", 1))
    if meta.name == path.name or not meta.is_file():
        return None
    try:
        version = orjson.loads(meta.read_bytes()).get("version")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return version if type(version) is int else None


# -- the Python SDK's models --------------------------------------------------------


@functools.cache
def load_sdk() -> Schema:
    """The installed SDK's models as JSON Schema (cached: generated once per process)."""
    from acp import schema as sdk_schema
    from pydantic import TypeAdapter
    from pydantic.json_schema import GenerateJsonSchema

    def present(table: dict[str, str]) -> dict[str, str]:
        return {method: name for method, name in table.items() if hasattr(sdk_schema, name)}

    requests, notifications = present(SDK_REQUEST_PARAMS), present(SDK_NOTIFICATION_PARAMS)
    results = present(SDK_RESULTS)
    names = sorted({*requests.values(), *notifications.values(), *results.values(), ERROR_DEF})
    mode: Literal["validation"] = "validation"
    keyed = [(name, mode, TypeAdapter(getattr(sdk_schema, name))) for name in names]
    refs, document = TypeAdapter.json_schemas(
        keyed, ref_template="#/$defs/{model}", schema_generator=GenerateJsonSchema
    )
    defs = dict(document.get("$defs", {}))
    for name in names:  # a model pydantic inlined (a Union alias) gets a definition of its own
        ref = refs[(name, mode)]
        if ref.get("$ref") != f"#/$defs/{name}":
            defs[name] = ref
    return Schema(
        source="python-sdk",
        revision=sdk_revision(),
        defs=defs,
        requests=requests,
        notifications=notifications,
        results=results,
    )


def sdk_revision() -> str:
    """The installed SDK's version and the schema tag its models were generated from."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = f"agent-client-protocol {version('agent-client-protocol')} models"
    except PackageNotFoundError:
        return "agent-client-protocol (not installed)"
    spec = importlib.util.find_spec("acp")  # a top-level lookup: the SDK is not imported
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if locations:
        try:
            with open(Path(locations[0]) / "schema.py", encoding="utf-8") as source:
                head = [source.readline() for _ in range(5)]
        except OSError:
            head = []
        tags = [line.split("refs/tags/", 1)[1].strip() for line in head if "refs/tags/" in line]
        if tags:
            text += f" ({tags[0]})"
    return text
