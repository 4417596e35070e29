"""The display units the terminal report and the language server share."""

from __future__ import annotations

from brrr_trace import units


def test_durations() -> None:
    assert [units.duration(ns) for ns in (812, 35_200, 16_300_000, 2_410_000_000)] == [
        "812 ns",
        "35.2 µs",
        "16.3 ms",
        "2.41 s",
    ]


def test_percentages() -> None:
    assert units.percent(0.82) == "82%"
    assert units.percent(1, 3, decimals=1) == "33.3%"
    assert units.percent(-1, 8, decimals=1, signed=True) == "-12.5%"
    assert units.percent(1, 8, decimals=1, signed=True) == "+12.5%"
    assert units.share(1, 8) == "12.5%" and units.share(1, 0) == "–"


def test_rates() -> None:
    assert units.tflops(808.4) == "808 TFLOP/s" and units.tflops(3.44) == "3.4 TFLOP/s"
    assert units.tflops(3.44, whole=True) == "3 TFLOP/s"
    assert units.bandwidth(850) == "850 GB/s" and units.bandwidth(3412) == "3.41 TB/s"
    assert units.bandwidth(3412, whole_gb=True) == "3412 GB/s"
