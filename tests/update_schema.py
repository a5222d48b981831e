"""Schema oracle for the session/update kinds newer than the Python SDK's models.

schema_oracle.py checks messages against the SDK's pydantic models (schema
1.19), which know neither notice and compaction (stable in the bundle) nor
plan operations and subagents (marked unstable in the bundle, stable since
schema 1.34). These are checked against the JSON schema the TypeScript SDK
2.4.0 ships (tests/interop/node_modules, from ``npm ci``): the stable
``schema.json`` for the stable kinds, ``schema.unstable.json`` for the rest.

The JSON schema allows unknown properties everywhere, so validating alone
would pass a misspelt field; ``check_update`` also refuses any property the
schema does not declare for that object (``_undeclared``).
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest

SCHEMA_DIR = Path(__file__).resolve().parent / "interop/node_modules/@agentclientprotocol/sdk/schema/v1"

#: Fields stable since schema 1.34, newer than the 2.4.0 bundle: (definition, property).
NEWER_THAN_BUNDLE = frozenset({("PlanMarkdown", "path")})


@cache
def _schema(name: str) -> dict[str, Any]:
    path = SCHEMA_DIR / name
    if not path.is_file():
        reason = f"{path} is missing (run `npm ci` in tests/interop)"
        if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
            pytest.fail(reason)
        pytest.skip(reason)
    schema: dict[str, Any] = orjson.loads(path.read_bytes())
    return schema


@cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    defs = _schema(name)["$defs"]
    return Draft202012Validator({"$ref": "#/$defs/SessionNotification", "$defs": defs})


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        return name, defs[name]
    return None, node


def _matches(obj: dict[str, Any], node: dict[str, Any], defs: dict[str, Any]) -> bool:
    """Whether ``obj`` fits a branch's discriminating consts (how oneOf/anyOf pick here)."""
    _, node = _resolve(node, defs)
    if node.get("type") == "null" or "not" in node:
        return False
    for key, prop in node.get("properties", {}).items():
        if "const" in prop and obj.get(key) != prop["const"]:
            return False
    return "const" not in node


def _declared(obj: dict[str, Any], node: dict[str, Any], defs: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Every property the schema declares for ``obj`` at ``node``: name -> (definition, its schema)."""
    name, node = _resolve(node, defs)
    found: dict[str, tuple[str, Any]] = {k: (name or "", v) for k, v in node.get("properties", {}).items()}
    for sub in node.get("allOf", []):
        found.update(_declared(obj, sub, defs))
    for key in ("oneOf", "anyOf"):
        for sub in node.get(key, []):
            if _matches(obj, sub, defs):
                found.update(_declared(obj, sub, defs))
    return found


def _undeclared(obj: Any, node: dict[str, Any], defs: dict[str, Any], path: str) -> list[str]:
    if not isinstance(obj, dict):
        return []
    declared = _declared(obj, node, defs)
    owners = {owner for owner, _ in declared.values()}
    problems = []
    for key, value in obj.items():
        if key not in declared:
            if not any((owner, key) in NEWER_THAN_BUNDLE for owner in owners):
                problems.append(f"{path}.{key}")
            continue
        _, prop = declared[key]
        if isinstance(value, dict) and _declared(value, prop, defs):  # an object the schema describes
            problems += _undeclared(value, prop, defs, f"{path}.{key}")
        elif isinstance(value, list):
            items = prop.get("items")
            for i, item in enumerate(value):
                if items is not None and isinstance(item, dict) and _declared(item, items, defs):
                    problems += _undeclared(item, items, defs, f"{path}.{key}[{i}]")
    return problems


@cache
def _kinds(name: str) -> frozenset[str]:
    variants = _schema(name)["$defs"]["SessionUpdate"]["oneOf"]
    return frozenset(v["properties"]["sessionUpdate"]["const"] for v in variants)


def check_update(params: dict[str, Any]) -> None:
    """Validate one ``session/update`` params object against every bundled schema that has its
    kind (a stable kind against both); AssertionError naming what is wrong."""
    kind = params["update"]["sessionUpdate"]
    names = [name for name in ("schema.json", "schema.unstable.json") if kind in _kinds(name)]
    assert names, f"no bundled schema has the session/update kind {kind!r}"
    for name in names:
        errors = [e.message for e in _validator(name).iter_errors(params)]
        assert not errors, f"{name}: {kind} invalid: {errors[:3]}"
        defs = _schema(name)["$defs"]
        extra = _undeclared(params, {"$ref": "#/$defs/SessionNotification"}, defs, "$")
        assert not extra, f"{name}: {kind} has properties the schema does not declare: {extra}"
