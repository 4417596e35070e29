"""Which GPU a trace ran on: a ``deviceProperties`` record matched to the peak table.

Names in traces are not the keys of any table (``NVIDIA H100 80GB HBM3``, ``Tesla
V100-SXM2-32GB``, ``AMD Radeon Graphics``), so a device is recognised by name tokens and settled
by its hardware (compute capability, SM count, memory); a slice of a known part (MIG, CPX) gets
that part's peaks scaled to its share (reference ``rules-and-roofline.md`` §5.4).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from brrr_trace.hardware.peaks import GpuPeak, TableEntry, bundled_entries

_NAME_KEYS = ("name",)
_MAJOR_KEYS = ("computeMajor", "major")
_MINOR_KEYS = ("computeMinor", "minor")
_SMS_KEYS = ("numSms", "multiProcessorCount", "maxComputeUnits")
_MEM_KEYS = ("totalGlobalMem", "totalMemory")


def _prop(props: Mapping[str, object], keys: Sequence[str]) -> object:
    for k in keys:
        if k in props:
            return props[k]
    return None


def _prop_int(props: Mapping[str, object], keys: Sequence[str]) -> int | None:
    v = _prop(props, keys)
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"[0-9]{1,18}", v.strip()):
        return int(v.strip())
    return None


def _tokens(name: str) -> frozenset[str]:
    return frozenset(t for t in re.split(r"[^a-z0-9]+", name.lower()) if t)


def _vendor(props: Mapping[str, object], name: str) -> str | None:
    warp = _prop_int(props, ("warpSize",))
    low = name.lower()
    if warp == 64 or low.startswith("amd") or "radeon" in low or "instinct" in low:
        return "amd"
    if warp == 32 or low.startswith(("nvidia", "tesla", "geforce", "quadro")):
        return "nvidia"
    return None


def _memory_distance(peak: GpuPeak, mem_gib: float | None) -> float:
    if mem_gib is None or mem_gib <= 0 or not peak.memory_gib:
        return 0.0
    return min(abs(math.log(mem_gib / m)) for m in peak.memory_gib if m > 0)


def match_device(
    props: Mapping[str, object],
    table: Sequence[GpuPeak] | None = None,
    *,
    memory_tolerance: float = 1.3,
) -> GpuPeak | None:
    """The peak entry for one ``deviceProperties`` (or legacy ``computeProperties``) record.

    Names are matched by token sets, most specific first (reference §5.4): names in traces are
    not the keys of any table (``NVIDIA H100 80GB HBM3``, ``Tesla V100-SXM2-32GB``), and an exact
    lookup silently misses them. Ties and generic names (``AMD Radeon Graphics``, ``""``,
    ``NVIDIA A100-PG509-200``) are settled by compute capability, SM/CU count and memory size.
    A name that matches but reports fewer SMs than the full part is a partition (MIG, CPX): its
    peaks are scaled by the SM fraction and its bandwidth by the memory fraction. A name that
    matches nothing is recognised from the hardware alone only when capability and SM count are
    exact and memory is within ``memory_tolerance`` (a ratio); anything else is unknown (None).
    ``table`` defaults to the bundled table (a user table from :func:`parse_peak_table` has no
    name patterns and is matched by hardware only).
    """
    if not isinstance(props, Mapping):
        return None
    entries: Sequence[TableEntry]
    if table is None:
        entries = bundled_entries()
    else:
        bundled = {r.peak: r.patterns for r in bundled_entries()}
        entries = [TableEntry(p, bundled.get(p, ())) for p in table]
    raw_name = _prop(props, _NAME_KEYS)
    name = raw_name if isinstance(raw_name, str) else ""
    major, minor = _prop_int(props, _MAJOR_KEYS), _prop_int(props, _MINOR_KEYS)
    cc = (major, minor) if major is not None and minor is not None else None
    sms = _prop_int(props, _SMS_KEYS)
    if sms is not None and sms <= 0:
        sms = None
    mem = _prop_int(props, _MEM_KEYS)
    mem_gib = mem / 2**30 if mem is not None and mem > 0 else None
    vendor = _vendor(props, name)

    def compatible(peak: GpuPeak, allow_partition: bool) -> bool:
        if vendor is not None and peak.vendor and peak.vendor != vendor:
            return False
        if cc is not None and peak.compute_capability is not None and cc != peak.compute_capability:
            return False
        return not (
            sms is not None
            and peak.sms is not None
            and (sms > peak.sms or (sms < peak.sms and not allow_partition))
        )

    tokens = _tokens(name)
    best_len = 0
    named: list[TableEntry] = []
    for rec in entries:
        hit = max((len(p) for p in rec.patterns if p and p <= tokens), default=0)
        if hit > best_len:
            best_len, named = hit, [rec]
        elif hit and hit == best_len:
            named.append(rec)
    if named:
        fits = [r.peak for r in named if compatible(r.peak, allow_partition=True)]
        if not fits:
            return None
        chosen = min(fits, key=lambda p: _memory_distance(p, mem_gib))  # stable: file order
        return _partition(chosen, sms, mem_gib)
    if cc is None or sms is None:
        return None
    limit = math.log(memory_tolerance)
    fits = [
        r.peak
        for r in entries
        if r.peak.compute_capability is not None
        and r.peak.sms is not None
        and compatible(r.peak, allow_partition=False)
        and _memory_distance(r.peak, mem_gib) <= limit
    ]
    if not fits:
        return None
    return min(fits, key=lambda p: _memory_distance(p, mem_gib))


def _partition(peak: GpuPeak, sms: int | None, mem_gib: float | None) -> GpuPeak:
    """The share of ``peak`` a slice with ``sms`` SMs gets (MIG, CPX): compute scales with its
    SMs, bandwidth with its memory; the full part is returned unchanged."""
    if sms is None or peak.sms is None or sms >= peak.sms:
        return peak
    frac = sms / peak.sms
    bw_frac = 1.0
    if mem_gib is not None and peak.memory_gib:
        bw_frac = min(1.0, mem_gib / max(peak.memory_gib))
    return replace(
        peak,
        name=f"{peak.name} (partition: {sms}/{peak.sms} SMs)",
        sms=sms,
        memory_gib=(round(mem_gib, 2),) if mem_gib is not None else peak.memory_gib,
        tensor_tflops=peak.tensor_tflops.scaled(frac),
        simt_tflops=peak.simt_tflops.scaled(frac),
        hbm_gbps=None if peak.hbm_gbps is None else peak.hbm_gbps * bw_frac,
    )
