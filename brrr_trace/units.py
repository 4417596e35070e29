"""Numbers as a person reads them: durations, percentages, FLOP and byte rates.

The terminal report (``render.text``) and the language server both show these; one module keeps
their units the same and lets the server format without importing the terminal renderer.
"""

from __future__ import annotations


def duration(ns: int) -> str:
    """A duration the way a person reads it: 812 ns, 35.2 µs, 16.3 ms, 2.41 s."""
    if ns < 1_000:
        return f"{ns} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e9:.2f} s"


def percent(part: float, whole: float = 1.0, decimals: int = 0, signed: bool = False) -> str:
    """``part`` of ``whole`` (a fraction when ``whole`` is left out) as ``82%``; ``+4.1%``."""
    sign = "+" if signed else ""
    return f"{100 * part / whole:{sign}.{decimals}f}%"


def share(part: float, whole: float) -> str:
    """``12.3%`` of ``whole``, or ``–`` when there is no whole to take a share of."""
    return percent(part, whole, decimals=1) if whole else "–"


def tflops(value: float, whole: bool = False) -> str:
    """``808 TFLOP/s``; below 10 with one decimal (``3.4 TFLOP/s``) unless ``whole``."""
    return f"{value:.0f} TFLOP/s" if whole or value >= 10 else f"{value:.1f} TFLOP/s"


def bandwidth(gbps: float, whole_gb: bool = False) -> str:
    """``850 GB/s``, and from 1000 GB/s on ``3.41 TB/s``; ``whole_gb``: always whole GB/s."""
    return f"{gbps / 1000:.2f} TB/s" if gbps >= 1000 and not whole_gb else f"{gbps:.0f} GB/s"


def data_size(nbytes: int) -> str:
    """``512 B``, ``4.2 kB``, ``45.7 MB``, ``1.20 GB`` (decimal units, as bandwidths are)."""
    if nbytes < 1_000:
        return f"{nbytes} B"
    if nbytes < 1_000_000:
        return f"{nbytes / 1e3:.1f} kB"
    if nbytes < 1_000_000_000:
        return f"{nbytes / 1e6:.1f} MB"
    return f"{nbytes / 1e9:.2f} GB"


# A range whose ends are this close to the saving itself is not worth saying.
_RANGE_WORTH_SAYING = 0.1


def saving_range(saving_ns: int, bounds: tuple[int, int] | None) -> str:
    """``1.9 ms to 4.6 ms``: what a fix saves as the profiler's real cost varies (a finding's
    ``est_savings_range_ns``), or "" when there is no range or it hardly differs."""
    if bounds is None:
        return ""
    low, high = bounds
    if saving_ns - low <= _RANGE_WORTH_SAYING * saving_ns >= high - saving_ns:
        return ""
    return f"{duration(low)} to {duration(high)}"
