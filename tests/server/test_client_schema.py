"""The VS Code extension's ``client/package.json`` is the settings schema
(docs/architecture.md §9): every ``brrr-trace.*`` setting there is one of the server's settings
with the same default, and every server setting is there, except the client's own
(``interpreter``: which Python runs the server).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from brrr_trace.server.settings import Settings, defaults_by_key, parse_settings

MANIFEST = Path(__file__).resolve().parents[2] / "client" / "package.json"
CLIENT_ONLY = {"interpreter"}
JSON_TYPES = {
    "string": str,
    "number": (int, float),
    "integer": int,
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}


def _properties() -> dict[str, dict[str, Any]]:
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    properties = manifest["contributes"]["configuration"]["properties"]
    assert all(key.startswith("brrr-trace.") for key in properties)
    return {key.removeprefix("brrr-trace."): schema for key, schema in properties.items()}


def test_the_client_schema_has_every_server_setting_and_no_other() -> None:
    client = set(_properties()) - CLIENT_ONLY
    assert client == set(defaults_by_key())
    assert set(_properties()) >= CLIENT_ONLY


def test_every_dataclass_field_has_a_key() -> None:
    # defaults_by_key() is built from the parser's key table; the table must cover the dataclass.
    parsed = parse_settings({key: value for key, value in defaults_by_key().items()})
    assert parsed.problems == () and parsed.unknown_keys == ()
    assert parsed.settings == Settings()
    assert len(defaults_by_key()) == len(Settings.__dataclass_fields__)


@pytest.mark.parametrize("key", sorted(defaults_by_key()))
def test_the_client_default_is_the_server_default(key: str) -> None:
    schema = _properties()[key]
    assert schema["default"] == defaults_by_key()[key]
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    assert isinstance(schema["default"], tuple(JSON_TYPES[name] for name in types))
    # What the client sends back (its default, as VS Code gives it) parses without a problem.
    parsed = parse_settings({"brrr-trace": {key: schema["default"]}})
    assert parsed.problems == () and parsed.unknown_keys == ()


def test_the_interpreter_setting_is_restricted_in_untrusted_workspaces() -> None:
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    untrusted = manifest["capabilities"]["untrustedWorkspaces"]
    assert untrusted["supported"] == "limited"
    assert untrusted["restrictedConfigurations"] == ["brrr-trace.interpreter"]
    assert "extensionDependencies" not in manifest  # the Python extension is optional
