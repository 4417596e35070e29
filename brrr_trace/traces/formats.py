"""Naming the files people pass by mistake: a checkpoint, an Nsight report, a compressed trace.

"not JSON (starts with 'PK…')" tells nothing; "this is a PyTorch checkpoint" and how to get the
trace brrr-trace reads does. Recognised by the first bytes, else by the name's extension.
"""

from __future__ import annotations

_TORCH_PROFILER = (
    "brrr-trace reads the Chrome-trace JSON that torch.profiler writes: "
    "prof.export_chrome_trace('trace.json'), on_trace_ready=tensorboard_trace_handler(dir), "
    "or `brrr-trace record -- python train.py`"
)
_NSIGHT = (
    "brrr-trace reads Kineto JSON, not Nsight files: profile the run with torch.profiler "
    "(prof.export_chrome_trace('trace.json')) or `brrr-trace record -- python train.py`"
)
_DECOMPRESS = "decompress it first (brrr-trace reads .json and .json.gz)"

# (first bytes, what the file is, what to do)
_MAGIC: tuple[tuple[bytes, str, str], ...] = (
    (b"PK\x03\x04", "a zip archive (torch.save writes checkpoints and models so)", _TORCH_PROFILER),
    (b"SQLite format 3\x00", "an SQLite database (an Nsight Systems export?)", _NSIGHT),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", _DECOMPRESS),
    (b"BZh", "bzip2-compressed", _DECOMPRESS),
    (b"\xfd7zXZ\x00", "xz-compressed", _DECOMPRESS),
    (b"\x89HDF", "an HDF5 file", _TORCH_PROFILER),
    (b"\x80\x02", "a Python pickle (torch.save's legacy format?)", _TORCH_PROFILER),
)
# (name ending, what the file is, what to do), for formats without a magic number of their own.
_EXTENSIONS: tuple[tuple[str, str, str], ...] = (
    (".nsys-rep", "an Nsight Systems report", _NSIGHT),
    (".qdrep", "an Nsight Systems report", _NSIGHT),
    (".ncu-rep", "an Nsight Compute report", _NSIGHT),
    (".sqlite", "an SQLite database (an Nsight Systems export?)", _NSIGHT),
    (".pt", "a PyTorch checkpoint or model", _TORCH_PROFILER),
    (".pth", "a PyTorch checkpoint or model", _TORCH_PROFILER),
    (".ckpt", "a checkpoint", _TORCH_PROFILER),
    (".pftrace", "a Perfetto protobuf trace", _TORCH_PROFILER),
    (".perfetto-trace", "a Perfetto protobuf trace", _TORCH_PROFILER),
)


def describe(name: str, head: bytes) -> str | None:
    """One sentence on what a file that is not a trace is and what to do, or None if unknown."""
    for magic, what, advice in _MAGIC:
        if head.startswith(magic):
            return f"{name}: is {what}, not a profiler trace; {advice}."
    lowered = name.lower()
    for ending, what, advice in _EXTENSIONS:
        if lowered.endswith(ending):
            return f"{name}: looks like {what} (by its name), not a profiler trace; {advice}."
    return None
