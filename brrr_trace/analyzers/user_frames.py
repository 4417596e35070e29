"""Which Python frames of a trace are the user's own code: files under the source root (when
any of the trace's files is there), less the frames torch.compile ran as a graph."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from brrr_trace.analyzers.frames import is_user_file, parse_frame
from brrr_trace.analyzers.intervals import NONE, Innermost
from brrr_trace.analyzers.paths import PathMapper
from brrr_trace.arraysets import distinct
from brrr_trace.options import AnalysisOptions
from brrr_trace.traces.model import Trace

_COMPILER_FRAME = "torch/_dynamo/"
_FRAME_CHUNK = 1 << 18  # frames looked up at a time (compiled_frames)


def local_files(
    trace: Trace, options: AnalysisOptions, mapper: PathMapper | None
) -> Callable[[str], bool] | None:
    """Whether a trace path is the user's own file, when the source is at hand: it maps under
    the source root. Without any file of the trace under the root (a colleague's trace read
    without the checkout) the trace's paths alone decide."""
    if mapper is None or mapper.root is None:
        return None
    files = {
        parsed.file
        for sid in distinct(trace.frames.name).tolist()
        if (parsed := parse_frame(trace.strings[sid])) is not None
    }
    mapper.expect(files)
    if not any(mapper.map(f) for f in files if is_user_file(f, options)):
        return None
    return lambda file: mapper.map(file) is not None


def compiled_frames(trace: Trace, user: np.ndarray) -> np.ndarray:
    """User frames that torch.compile ran as a graph: their statements never ran one by one.

    Dynamo enters the original frame from its own eval-frame wrapper; time inside belongs to the
    line that called the compiled function, so such frames are skipped over. Only frames inside
    a compiler frame can be one, so only those are looked at.
    """
    frames = trace.frames
    out = np.zeros(len(frames), dtype=bool)
    is_compiler = np.array([s.startswith(_COMPILER_FRAME) for s in trace.strings], dtype=bool)
    compiler = is_compiler[frames.name] if len(frames) else out
    if not compiler.any() or not user.any():
        return out
    # Frames lying inside a compiler frame of their thread (sweep over each thread's windows).
    inside = np.zeros(len(frames), dtype=bool)
    for h in distinct(frames.thread[compiler]).tolist():
        win = np.flatnonzero((frames.thread == h) & compiler)
        order = np.argsort(frames.start_ns[win])
        w_start = frames.start_ns[win][order]
        w_reach = np.maximum.accumulate(frames.end_ns[win][order])
        # The thread's frames a chunk at a time: its millions of rows and their lookups at
        # once were ~60 MB for a moment (0.86 GB benchmark trace).
        for lo in range(0, len(frames), _FRAME_CHUNK):
            on = lo + np.flatnonzero(frames.thread[lo : lo + _FRAME_CHUNK] == h)
            k = np.searchsorted(w_start, frames.start_ns[on], side="right") - 1
            ok = k >= 0
            inside[on[ok]] = frames.end_ns[on[ok]] <= w_reach[k[ok]]
    candidates = np.flatnonzero(user & inside)
    if not len(candidates):
        return out
    others = np.flatnonzero(~user & inside | compiler)
    index = Innermost(frames.thread[others], frames.start_ns[others], frames.end_ns[others])
    parent = index.at_many(frames.thread[candidates], frames.start_ns[candidates])
    found = parent != NONE
    out[candidates[found]] = compiler[others[parent[found]]]
    return out
