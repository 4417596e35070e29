"""The GPU peak table: datasheet ceilings per device, bundled as package data.

The table is ``brrr_trace/data/gpu_peaks.json`` (reference ``rules-and-roofline.md`` §5) so that a
new GPU is a data change, not a code change; a user may bring a table of the same shape. Each entry
also says how its name is recognised; that stays in :class:`TableEntry`, out of the
:class:`GpuPeak` the report shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import msgspec

# The kind of arithmetic unit (or the host link) that bounds a piece of work.
Unit = Literal["tensor", "simt", "link"]

PRECISIONS: tuple[str, ...] = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")


@dataclass(frozen=True)
class UnitPeaks:
    """Dense TFLOP/s of one kind of arithmetic unit per precision; None where the unit lacks it.

    A small frozen record rather than a dict so that a GpuPeak stays hashable and
    ``dataclasses.asdict`` gives the report a plain nested object.
    """

    fp64: float | None = None
    fp32: float | None = None
    tf32: float | None = None
    fp16: float | None = None
    bf16: float | None = None
    fp8: float | None = None
    int8: float | None = None
    fp4: float | None = None

    def get(self, dtype: str | None) -> float | None:
        """TFLOP/s for a normalised dtype name; None for unknown names (never raises)."""
        if dtype not in PRECISIONS:
            return None
        value: float | None = getattr(self, dtype)
        return value

    def scaled(self, factor: float) -> UnitPeaks:
        """The same unit on a fraction of the chip (a MIG slice, a compute partition)."""
        values = {p: (None if (v := getattr(self, p)) is None else v * factor) for p in PRECISIONS}
        return UnitPeaks(**values)


@dataclass(frozen=True)
class GpuPeak:
    """Datasheet ceilings of one device as PyTorch sees it (an MI250X GCD is one device).

    ``tensor_tflops`` are matrix units (tensor cores / AMD matrix cores), ``simt_tflops`` plain
    vector math. Bandwidths are in GB/s (1e9 bytes); ``link_gbps`` is the host link per direction.
    """

    name: str
    vendor: str
    compute_capability: tuple[int, int] | None
    sms: int | None
    memory_gib: tuple[float, ...]
    tensor_tflops: UnitPeaks
    simt_tflops: UnitPeaks
    hbm_gbps: float | None
    link_gbps: float | None
    link: str | None
    source: str

    def tflops(self, dtype: str | None, unit: Unit) -> float | None:
        """Peak TFLOP/s of ``unit`` ("tensor" or "simt") for ``dtype``; None if unknown."""
        if unit == "tensor":
            return self.tensor_tflops.get(dtype)
        if unit == "simt":
            return self.simt_tflops.get(dtype)
        return None


@dataclass(frozen=True)
class TableEntry:
    """A table entry with the name patterns that recognise it; kept out of GpuPeak so reports
    stay free of them."""

    peak: GpuPeak
    patterns: tuple[frozenset[str], ...]


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _unit_peaks(raw: object) -> UnitPeaks:
    if not isinstance(raw, Mapping):
        return UnitPeaks()
    unknown = set(raw) - set(PRECISIONS)
    if unknown:
        raise ValueError(f"unknown precisions in peak table: {sorted(unknown)}")
    return UnitPeaks(**{p: _num(raw.get(p)) for p in PRECISIONS})


def _parse_entry(raw: Mapping[str, Any]) -> TableEntry:
    cc = raw.get("compute_capability")
    peak = GpuPeak(
        name=str(raw["name"]),
        vendor=str(raw.get("vendor", "")),
        compute_capability=(int(cc[0]), int(cc[1])) if cc else None,
        sms=int(raw["sms"]) if raw.get("sms") is not None else None,
        memory_gib=tuple(float(m) for m in raw.get("memory_gib", ())),
        tensor_tflops=_unit_peaks(raw.get("tensor_tflops")),
        simt_tflops=_unit_peaks(raw.get("simt_tflops")),
        hbm_gbps=_num(raw.get("hbm_gbps")),
        link_gbps=_num(raw.get("link_gbps")),
        link=str(raw["link"]) if raw.get("link") is not None else None,
        source=str(raw.get("source", "")),
    )
    patterns = tuple(frozenset(str(t).lower() for t in p) for p in raw.get("match", ()))
    return TableEntry(peak, patterns)


def parse_peak_table(data: Mapping[str, Any]) -> tuple[GpuPeak, ...]:
    """Peaks from a table shaped like the bundled one (lets a user bring their own GPU)."""
    return tuple(r.peak for r in _parse_table(data))


def _parse_table(data: Mapping[str, Any]) -> tuple[TableEntry, ...]:
    return tuple(_parse_entry(e) for e in data["gpus"])


@cache
def bundled_entries() -> tuple[TableEntry, ...]:
    """The bundled table with its name patterns, parsed once per process."""
    bundled = Path(__file__).resolve().parent.parent / "data" / "gpu_peaks.json"
    if bundled.is_file():
        text = bundled.read_text("utf-8")
    else:  # an installation that is not plain files (a zip): importlib.resources, ~16 ms
        from importlib import resources

        text = resources.files("brrr_trace").joinpath("data/gpu_peaks.json").read_text("utf-8")
    return _parse_table(msgspec.json.decode(text))


def load_peak_table() -> tuple[GpuPeak, ...]:
    """The bundled peak table, parsed once per process."""
    return tuple(r.peak for r in bundled_entries())
