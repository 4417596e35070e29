"""Checks that hold for every report, shared by the tests of real and public traces."""

from __future__ import annotations


def assert_no_rate_above_the_peak(report: dict) -> None:  # type: ignore[type-arg]
    """No line reaches more than its roofline bound, nor a rate above the device's peak."""
    peaks = [d["peak"] for d in report["trace"]["devices"] if d.get("peak")]
    for line in report["lines"]:
        where = (line["file"], line["line"], line["function"])
        assert line["peak_fraction"] is None or line["peak_fraction"] <= 1.0, where
        for peak in peaks:
            if line["achieved_gbps"] is not None and peak.get("hbm_gbps"):
                assert line["achieved_gbps"] <= peak["hbm_gbps"] * 1.000001, where
