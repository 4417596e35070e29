"""The GPU peak table and device recognition: datasheet values, realistic and odd devices, MIG.

Every entry of the bundled table has a realistic ``deviceProperties`` here, and every GPU in the
public traces must be recognised as the part it is.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brrr_trace.hardware.devices import match_device
from brrr_trace.hardware.peaks import load_peak_table, parse_peak_table
from tests.json_strategies import json_leaf
from tests.public_scan import PublicScan

GiB = 2**30
PEAKS = {p.name: p for p in load_peak_table()}


def nv(name: str, major: int, minor: int, sms: int, mem: int) -> dict[str, object]:
    return {
        "id": 0,
        "name": name,
        "totalGlobalMem": mem,
        "computeMajor": major,
        "computeMinor": minor,
        "numSms": sms,
        "warpSize": 32,
        "maxThreadsPerMultiprocessor": 2048,
    }


def amd(name: str, major: int, minor: int, cus: int, mem: int) -> dict[str, object]:
    props = nv(name, major, minor, cus, mem)
    props["warpSize"] = 64
    return props


# One realistic deviceProperties per table entry. Names marked (observed) are copied from the
# public traces or the project's H200 fixtures; the others follow the vendors' naming.
REALISTIC: dict[str, dict[str, object]] = {
    "V100 SXM2": nv("Tesla V100-SXM2-32GB", 7, 0, 80, 34_079_899_648),  # observed
    "V100 PCIe": nv("Tesla V100-PCIE-16GB", 7, 0, 80, 16_945_512_448),
    "V100S PCIe": nv("Tesla V100S-PCIE-32GB", 7, 0, 80, 34_089_730_048),
    "T4": nv("Tesla T4", 7, 5, 40, 15_843_721_216),
    "GeForce RTX 2080 Ti": nv("NVIDIA GeForce RTX 2080 Ti", 7, 5, 68, 11_554_586_624),  # observed
    "A100 SXM4 40GB": nv("NVIDIA A100-SXM4-40GB", 8, 0, 108, 42_505_273_344),
    "A100 SXM4 80GB": nv("NVIDIA A100-SXM4-80GB", 8, 0, 108, 84_990_623_744),  # observed
    "A100 PCIe 40GB": nv("NVIDIA A100-PCIE-40GB", 8, 0, 108, 42_505_273_344),
    "A100 PCIe 80GB": nv("NVIDIA A100 80GB PCIe", 8, 0, 108, 84_987_740_160),  # observed
    "A10": nv("NVIDIA A10", 8, 6, 72, 23_609_475_072),
    "A10G": nv("NVIDIA A10G", 8, 6, 80, 23_609_475_072),
    "GeForce RTX 3090": nv("NVIDIA GeForce RTX 3090", 8, 6, 82, 25_438_126_080),
    "L4": nv("NVIDIA L4", 8, 9, 58, 23_580_639_232),
    "L40S": nv("NVIDIA L40S", 8, 9, 142, 47_697_362_944),
    "L40": nv("NVIDIA L40", 8, 9, 142, 47_697_362_944),
    "GeForce RTX 4090": nv("NVIDIA GeForce RTX 4090", 8, 9, 128, 25_393_692_672),
    "H100 SXM5 80GB": nv("NVIDIA H100 80GB HBM3", 9, 0, 132, 85_018_279_936),  # observed
    "H100 PCIe": nv("NVIDIA H100 PCIe", 9, 0, 114, 85_030_043_648),
    "H100 NVL": nv("NVIDIA H100 NVL", 9, 0, 132, 99_965_181_952),
    "GH200 96GB": nv("NVIDIA GH200 480GB", 9, 0, 132, 102_005_473_280),
    "GH200 144GB": nv("NVIDIA GH200 144G HBM3e", 9, 0, 132, 150_323_855_360),
    "H200 SXM": nv("NVIDIA H200", 9, 0, 132, 150_109_880_320),  # observed (tests/data/h200)
    "H200 NVL": nv("NVIDIA H200 NVL", 9, 0, 132, 150_109_880_320),
    "B200": nv("NVIDIA B200", 10, 0, 148, 191_503_138_816),  # observed
    "GB200": nv("NVIDIA GB200", 10, 0, 152, 197_568_495_616),
    "MI250 (per GCD)": amd("AMD Instinct MI250", 9, 0, 104, 68_702_699_520),
    "MI210": amd("AMD Instinct MI210", 9, 0, 104, 68_702_699_520),  # observed
    "MI250X (per GCD)": amd("AMD Instinct MI250X", 9, 0, 110, 68_702_699_520),
    "MI300X": amd("AMD Instinct MI300X", 9, 4, 304, 206_141_652_992),  # observed
    "MI325X": amd("AMD Instinct MI325X", 9, 4, 304, 274_877_906_944),
}


# --- peak table ----------------------------------------------------------------------------------


def test_every_table_entry_has_a_realistic_device_in_this_file() -> None:
    assert set(PEAKS) == set(REALISTIC), "add a realistic deviceProperties for each new GPU"


@pytest.mark.parametrize("expected", sorted(REALISTIC))
def test_each_gpu_is_recognised_from_a_realistic_device_properties(expected: str) -> None:
    peak = match_device(REALISTIC[expected])
    assert peak is not None
    assert peak.name == expected


def test_table_entries_are_complete_and_dense() -> None:
    table = load_peak_table()
    assert len({p.name for p in table}) == len(table)
    for p in table:
        assert p.source and p.vendor in ("nvidia", "amd"), p.name
        assert p.hbm_gbps and p.hbm_gbps > 0, p.name
        assert p.link_gbps and p.link_gbps > 0, p.name
        half = p.tensor_tflops.bf16 or p.tensor_tflops.fp16
        assert half is not None, p.name
        # the ridge of the half-precision tensor peak stays within the range of real GPUs
        assert 50 < half * 1e12 / (p.hbm_gbps * 1e9) < 450, p.name
        if p.tensor_tflops.tf32 is not None:
            assert p.tensor_tflops.tf32 <= half, p.name
        if p.simt_tflops.fp32 is not None:
            assert p.simt_tflops.fp32 <= half, p.name


def test_datasheet_values_for_the_common_gpus() -> None:
    h100 = PEAKS["H100 SXM5 80GB"]
    assert (h100.tensor_tflops.bf16, h100.tensor_tflops.tf32) == (989.4, 494.7)
    assert (h100.simt_tflops.fp32, h100.hbm_gbps) == (67, 3350)
    assert h100.tensor_tflops.fp8 == 1978.9  # dense, not the 3,958 sparse figure
    h200 = PEAKS["H200 SXM"]
    assert (h200.tensor_tflops.bf16, h200.hbm_gbps) == (989.4, 4800)
    a100 = PEAKS["A100 SXM4 80GB"]
    assert (a100.tensor_tflops.bf16, a100.tensor_tflops.tf32, a100.simt_tflops.fp32) == (
        312,
        156,
        19.5,
    )
    assert (a100.hbm_gbps, PEAKS["A100 SXM4 40GB"].hbm_gbps) == (2039, 1555)
    v100 = PEAKS["V100 SXM2"]
    assert (v100.tensor_tflops.fp16, v100.tensor_tflops.bf16, v100.tensor_tflops.tf32) == (
        125,
        None,
        None,
    )
    mi300 = PEAKS["MI300X"]
    assert (mi300.tensor_tflops.bf16, mi300.tensor_tflops.fp32, mi300.hbm_gbps) == (
        1307.4,
        163.4,
        5300,
    )


def test_a_user_table_is_matched_by_hardware() -> None:
    data = {
        "gpus": [
            {
                "name": "My GPU",
                "vendor": "nvidia",
                "compute_capability": [8, 7],
                "sms": 16,
                "memory_gib": [30.0],
                "tensor_tflops": {"bf16": 100},
                "hbm_gbps": 200,
                "source": "mine",
            }
        ]
    }
    table = parse_peak_table(data)
    props = nv("Orin", 8, 7, 16, 32 * 10**9)
    assert match_device(props, table) == table[0]
    assert match_device(props) is None
    with pytest.raises(ValueError):
        parse_peak_table({"gpus": [{**data["gpus"][0], "tensor_tflops": {"fp12": 1}}]})


# --- device recognition --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        # ROCm 6.2 reports MI250 GCDs with a generic name (HTA amd_trace)
        (amd("AMD Radeon Graphics", 9, 0, 104, 68_702_699_520), "MI250 (per GCD)"),
        (amd("", 9, 4, 304, 206_141_652_992), "MI300X"),
        (amd("AMD Instinct MI300X VF", 9, 4, 304, 205_571_227_648), "MI300X"),
        # Meta's A100 SKU: the name says A100, the memory says 40 GB
        (nv("NVIDIA A100-PG509-200", 8, 0, 108, 42_297_524_224), "A100 SXM4 40GB"),
        # kineto's unit-test properties: generic H100 name, 132 SMs, ~95 GiB
        (nv("NVIDIA H100", 9, 0, 132, 102_085_492_736), "H100 NVL"),
        (nv("Tesla V100-DGXS-32GB", 7, 0, 80, 34_084_028_416), "V100 SXM2"),
        (nv("", 8, 0, 108, 84_990_623_744), "A100 SXM4 80GB"),
        (nv("", 8, 9, 142, 47_697_362_944), "L40S"),
        (nv("", 9, 0, 132, 150_109_880_320), "H200 SXM"),
        (
            {"name": "Tesla V100-SXM2-16GB", "major": 7, "minor": 0, "multiProcessorCount": 80},
            "V100 SXM2",
        ),
        ({"major": 7, "minor": 0, "multiProcessorCount": 80}, "V100 SXM2"),
    ],
)
def test_generic_names_and_legacy_keys_fall_back_to_the_hardware(
    props: dict[str, object], expected: str
) -> None:
    peak = match_device(props)
    assert peak is not None
    assert peak.name == expected


@pytest.mark.parametrize(
    "props",
    [
        nv("NVIDIA RTX A6000", 8, 6, 84, 51_041_271_808),
        nv("NVIDIA GeForce RTX 3090 Ti", 8, 6, 84, 25_438_126_080),  # more SMs than a 3090
        nv("NVIDIA H100 80GB HBM3", 8, 0, 132, 85_018_279_936),  # name and capability disagree
        {"id": 17, "name": "ARTEMIS", "runtimeMajorVersion": 1},  # MTIA
        {},
        {"name": 123, "computeMajor": "nine", "numSms": None, "totalGlobalMem": -5},
        {"name": None, "computeMajor": True, "computeMinor": 0.5, "numSms": [132]},
    ],
)
def test_unknown_or_inconsistent_devices_are_none(props: dict[str, object]) -> None:
    assert match_device(props) is None


def test_non_mapping_props_are_none() -> None:
    assert match_device([1, 2, 3]) is None  # type: ignore[arg-type]
    assert match_device(None) is None  # type: ignore[arg-type]


def test_a_mig_slice_scales_compute_by_sms_and_bandwidth_by_memory() -> None:
    mem = 20 * 10**9
    peak = match_device(nv("NVIDIA A100-SXM4-40GB MIG 3g.20gb", 8, 0, 42, mem))
    full = PEAKS["A100 SXM4 40GB"]
    assert peak is not None and "partition" in peak.name
    assert peak.tensor_tflops.bf16 == pytest.approx(312 * 42 / 108)
    assert peak.simt_tflops.fp32 == pytest.approx(19.5 * 42 / 108)
    assert peak.hbm_gbps == pytest.approx(1555 * (mem / GiB) / max(full.memory_gib))


# --- the public traces ---------------------------------------------------------------------------

EXPECTED_PUBLIC = {
    "NVIDIA B200": "B200",
    "NVIDIA H100 80GB HBM3": "H100 SXM5 80GB",
    "AMD Instinct MI300X": "MI300X",
    "AMD Instinct MI300X VF": "MI300X",
    "AMD Instinct MI210": "MI210",
    "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
    "Tesla V100-SXM2-32GB": "V100 SXM2",
    "Tesla V100-SXM2-16GB": "V100 SXM2",
    "Tesla V100-DGXS-32GB": "V100 SXM2",
    "NVIDIA GeForce RTX 2080 Ti": "GeForce RTX 2080 Ti",
    "AMD Radeon Graphics": "MI250 (per GCD)",
    "NVIDIA A100-PG509-200": "A100 SXM4 40GB",
    "NVIDIA A100-SXM4-80GB": "A100 SXM4 80GB",
    "NVIDIA H100": "H100 NVL",
}


def test_every_gpu_in_the_public_traces_is_recognised(public_scan: PublicScan) -> None:
    gpus = [(f, p) for f, p in public_scan.devices if "computeMajor" in p]
    assert len(gpus) >= 20
    for file, props in gpus:
        peak = match_device(props)
        assert peak is not None, (file, props.get("name"))
        assert peak.name == EXPECTED_PUBLIC[str(props["name"])], file


def test_non_gpu_devices_in_the_public_traces_are_unknown(public_scan: PublicScan) -> None:
    others = [p for _, p in public_scan.devices if "computeMajor" not in p]
    assert others  # the MTIA trace
    assert all(match_device(p) is None for p in others)


# --- odd input -----------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "name",
                "computeMajor",
                "computeMinor",
                "numSms",
                "totalGlobalMem",
                "warpSize",
                "major",
            ]
        ),
        json_leaf,
    )
)
def test_match_device_never_raises(props) -> None:
    peak = match_device(props)
    assert peak is None or peak.name in PEAKS or "partition" in peak.name
