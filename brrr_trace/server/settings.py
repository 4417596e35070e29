"""The server's settings: what a client sends, checked key by key into one frozen ``Settings``.

Clients send settings three ways (``initializationOptions``, ``workspace/didChangeConfiguration``
and answers to ``workspace/configuration``), namespaced (``{"brrr-trace": {...}}``) or flat
(``{...}``), with camelCase keys (VS Code) or snake_case keys (a Lua table). ``parse_settings``
accepts all of them. A bad value never stops the server: that key keeps its default and the
problem is returned as a sentence for the user; unknown keys are returned for the log.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from brrr_trace.analyzers.paths import path_mapping, resolve_local
from brrr_trace.options import DEFAULT_EXCLUDED_FILES, AnalysisOptions
from brrr_trace.report import RULES_DOCS_URL
from brrr_trace.server.globs import refusal

SECTION = "brrr-trace"
_SECTION_ALIASES = (SECTION, "brrrTrace", "brrr_trace")

DEFAULT_TRACE_GLOBS: tuple[str, ...] = (
    "**/*.pt.trace.json",
    "**/*.pt.trace.json.gz",
    "**/*trace*.json",
    "**/*trace*.json.gz",
)
# Where a rule's documentation lives; ``{rule}`` is replaced by the rule id
# (docs/architecture.md §7).
DEFAULT_RULES_DOCS_URL = RULES_DOCS_URL
LOG_LEVELS = ("error", "warning", "info", "debug")
# The report's own cut-offs, used when only one of the two is set.
DEFAULT_WARNING_SHARE = AnalysisOptions.warning_share
DEFAULT_INFORMATION_SHARE = AnalysisOptions.information_share


@dataclass(frozen=True)
class Settings:
    """Everything a user can set, resolved: each field has its default here and nowhere else."""

    # Globs (relative to each workspace folder; see ``globs.refusal``) of the trace files; the
    # newest one is active unless ``trace`` or the ``brrr-trace.selectTrace`` command picks one.
    traces: tuple[str, ...] = DEFAULT_TRACE_GLOBS
    # One trace file to use instead of the newest (absolute, or relative to the workspace folder).
    trace: str | None = None
    # A line whose time is below this fraction of the profiled GPU span gets no inlay hint.
    threshold: float = 0.01
    # Prefixes of paths as written in the trace, and the local folder each one maps onto.
    path_mappings: tuple[tuple[str, str], ...] = ()
    # The folder the trace's (shortened) source paths are matched against; default: the workspace.
    source_root: str | None = None
    # Extra globs of files that are never "the user's line" (added to the built-in ones).
    exclude_files: tuple[str, ...] = ()
    include_files: tuple[str, ...] = ()
    device: int | None = None
    rank: int | None = None
    inlay_hints: bool = True
    code_lens: bool = True
    diagnostics: bool = True
    # Diagnostic severity: by default the report's (by estimated saving as a share of the span).
    # Set these to choose other cut-offs: at least ``warning_share`` is a warning, at least
    # ``information_share`` an information, below it a hint.
    warning_share: float | None = None
    information_share: float | None = None
    rules_docs_url: str = DEFAULT_RULES_DOCS_URL
    # Seconds between checks of the trace files when the client cannot watch files for us.
    poll_interval: float = 1.0
    # The least severe level sent to the client's log (window/logMessage).
    log_level: str = "info"

    def severity_shares(self) -> tuple[float, float]:
        """The (warning, information) cut-offs, when the user set at least one of them."""
        warning = DEFAULT_WARNING_SHARE if self.warning_share is None else self.warning_share
        information = (
            DEFAULT_INFORMATION_SHARE if self.information_share is None else self.information_share
        )
        return warning, information

    def analysis_options(self, workspace_root: str | None) -> AnalysisOptions:
        """The analysis options these settings ask for, relative paths resolved at the root."""
        base = workspace_root or os.getcwd()
        source_root = resolve_local(self.source_root, base) if self.source_root else base
        mappings = tuple(path_mapping(prefix, local, base) for prefix, local in self.path_mappings)
        return AnalysisOptions(
            excluded_files=DEFAULT_EXCLUDED_FILES + self.exclude_files,
            included_files=self.include_files,
            source_root=source_root,
            path_mappings=mappings,
            device=self.device,
            rank=self.rank,
        )


@dataclass(frozen=True)
class ParsedSettings:
    settings: Settings
    # One sentence per rejected value: the key, what was expected, what came, the default used.
    problems: tuple[str, ...] = ()
    unknown_keys: tuple[str, ...] = ()
    # Whether the payload carried any of our keys at all (an empty answer keeps older settings).
    found: bool = False


class _Bad(ValueError):
    """A value that does not fit its key; the message says what was expected."""


def _string_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise _Bad("a list of strings")
    return tuple(v for v in value if v)


def _optional_str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _Bad("a string")
    return value


def _fraction(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad("a number from 0 to 1")
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise _Bad("a number from 0 to 1")
    return float(value)


def _optional_fraction(value: Any) -> float | None:
    return None if value is None else _fraction(value)


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad("a number of seconds from 0.05 to 3600")
    if not (math.isfinite(value) and 0.05 <= value <= 3600):
        raise _Bad("a number of seconds from 0.05 to 3600")
    return float(value)


def _optional_index(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad("a whole number ≥ 0, or null")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Bad("true or false")
    return value


def _docs_url(value: Any) -> str:
    if not isinstance(value, str) or "{rule}" not in value:
        raise _Bad('a URL containing "{rule}"')
    return value


def _log_level(value: Any) -> str:
    if not isinstance(value, str) or value.lower() not in LOG_LEVELS:
        raise _Bad("one of " + ", ".join(f'"{level}"' for level in LOG_LEVELS))
    return value.lower()


def _path_mappings(value: Any) -> tuple[tuple[str, str], ...]:
    """``[{"from": "/remote/src", "to": "${workspaceFolder}"}]``, or ``{"/remote/src": "."}``."""
    if isinstance(value, Mapping):
        value = [{"from": k, "to": v} for k, v in value.items()]
    if not isinstance(value, (list, tuple)):
        raise _Bad('a list of {"from": ..., "to": ...} objects')
    out = []
    for item in value:
        if not isinstance(item, Mapping):
            raise _Bad('a list of {"from": ..., "to": ...} objects')
        source, local = item.get("from"), item.get("to")
        if not isinstance(source, str) or not isinstance(local, str) or not source or not local:
            raise _Bad('a list of {"from": ..., "to": ...} objects with two non-empty strings')
        out.append((source.replace("\\", "/"), local))
    return tuple(out)


# camelCase key (as in the VS Code settings schema) -> (field, parser)
_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "traces": ("traces", _string_list),
    "trace": ("trace", _optional_str),
    "threshold": ("threshold", _fraction),
    "pathMappings": ("path_mappings", _path_mappings),
    "sourceRoot": ("source_root", _optional_str),
    "excludeFiles": ("exclude_files", _string_list),
    "includeFiles": ("include_files", _string_list),
    "device": ("device", _optional_index),
    "rank": ("rank", _optional_index),
    "inlayHints": ("inlay_hints", _bool),
    "codeLens": ("code_lens", _bool),
    "diagnostics": ("diagnostics", _bool),
    "warningShare": ("warning_share", _optional_fraction),
    "informationShare": ("information_share", _optional_fraction),
    "rulesDocsUrl": ("rules_docs_url", _docs_url),
    "pollInterval": ("poll_interval", _seconds),
    "logLevel": ("log_level", _log_level),
}
_BY_LOOSE_NAME = {key.lower(): key for key in _KEYS}


def defaults_by_key() -> dict[str, Any]:
    """Each setting's key (as in the client's settings schema) and its default, as JSON values.

    For the VS Code extension's ``package.json`` contract test (docs/architecture.md §9).
    """
    defaults = Settings()
    out: dict[str, Any] = {}
    for key, (name, _parse) in _KEYS.items():
        value = getattr(defaults, name)
        if name == "path_mappings":
            value = [{"from": source, "to": local} for source, local in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[key] = value
    return out


def _canonical(key: str) -> str | None:
    """``pathMappings``, ``path_mappings`` and ``PathMappings`` all name the same key."""
    return _BY_LOOSE_NAME.get(key.replace("_", "").replace("-", "").lower())


def _section(payload: Any) -> Mapping[str, Any] | None:
    if not isinstance(payload, Mapping):
        return None
    for alias in _SECTION_ALIASES:
        inner = payload.get(alias)
        if isinstance(inner, Mapping):
            return inner
    # VS Code may flatten to dotted keys: {"brrr-trace.threshold": 0.05}
    dotted = {
        key.split(".", 1)[1]: value
        for key, value in payload.items()
        if isinstance(key, str) and key.split(".", 1)[0] in _SECTION_ALIASES and "." in key
    }
    return dotted or payload


def parse_settings(payload: Any, base: Settings | None = None) -> ParsedSettings:
    """Check ``payload`` key by key on top of ``base`` (default: the defaults).

    Never raises: a value of the wrong kind keeps the value from ``base`` and adds a problem.
    """
    base = base or Settings()
    section = _section(payload)
    if payload is not None and section is None:
        return ParsedSettings(
            base, (f"settings: expected an object, got {_shown(payload)}; using the defaults.",)
        )
    changes: dict[str, Any] = {}
    problems: list[str] = []
    unknown: list[str] = []
    found = False
    for raw_key, value in (section or {}).items():
        key = _canonical(str(raw_key))
        if key is None:
            unknown.append(str(raw_key))
            continue
        found = True
        name, parse = _KEYS[key]
        try:
            changes[name] = parse(value)
        except _Bad as bad:
            default = getattr(base, name)
            problems.append(
                f"{SECTION}.{key}: expected {bad}, got {_shown(value)}; "
                f"using {_shown(default, limit=200)}."
            )
    settings = dataclasses.replace(base, **changes)
    if "traces" in changes:
        settings, refused = _without_refused_globs(settings)
        problems += refused
    warning, information = settings.severity_shares()
    if information > warning:
        problems.append(
            f"{SECTION}.informationShare ({information}) is above "
            f"{SECTION}.warningShare ({warning}); using the report's severities."
        )
        settings = dataclasses.replace(settings, warning_share=None, information_share=None)
    return ParsedSettings(settings, tuple(problems), tuple(unknown), found)


def _without_refused_globs(settings: Settings) -> tuple[Settings, list[str]]:
    """The settings with only the ``traces`` globs that stay in the workspace (all refused: the
    defaults), and one sentence naming the refused ones."""
    refused = [(p, why) for p in settings.traces if (why := refusal(p)) is not None]
    if not refused:
        return settings, []
    kept = tuple(p for p in settings.traces if refusal(p) is None) or DEFAULT_TRACE_GLOBS
    listed = "; ".join(f"{_shown(pattern)} ({why})" for pattern, why in refused)
    sentence = f"{SECTION}.traces: ignoring {listed}; using {_shown(kept, limit=200)}."
    return dataclasses.replace(settings, traces=kept), [sentence]


def _shown(value: Any, limit: int = 60) -> str:
    if isinstance(value, tuple):
        value = list(value)
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return text if len(text) <= limit else text[: limit - 3] + "..."
