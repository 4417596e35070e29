"""brrr-trace's additions to the Kineto JSON: written by `brrr-trace record`, read by `analyze`.

Other tools (Perfetto, HTA) ignore them. They are spelled here once, in the layer both sides
import, so that the writer (``recording/``) and the reader (``traces/``, ``analyzers/``) cannot
drift apart.
"""

from __future__ import annotations

# args of every ``python_function`` event: the line in the *caller's* frame where the call
# happened (Kineto only names the callee's ``def`` line); 0 when the recorder could not tell.
CALL_LINE_ARG = "brrr call line"

# A ``user_annotation`` named ``brrr.line N`` wraps each torch call made directly from user code
# on line N, so that operators without a Python call event (``a @ b``) get their line too.
LINE_ANNOTATION_PREFIX = "brrr.line "

# Top-level key: what was recorded (format version, torch version, exact_ops, call-line counts).
RECORD_KEY = "brrr_record"
RECORD_FORMAT_VERSION = 1
# In ``brrr_record``: the wall time of each step run unprofiled before the recording began (the
# wait steps, from the second on), in ns.
UNPROFILED_STEPS_KEY = "unprofiled_step_ns"
# In ``brrr_record``: the later half of those steps timed as one window between two device
# synchronizations, ``{"steps": N, "ns": T}``. A step's own wall time is the host's when the
# host runs ahead of the GPU (no sync inside a step); the window is the program's real pace.
UNPROFILED_WINDOW_KEY = "unprofiled_window"
# In ``brrr_record``: the wall time of each ``optimizer.step()`` call in that later half of the
# wait steps, in ns: the optimizer's own host time (a per-parameter Adam: 11.2 ms, 27.0 profiled),
# so that the analysis calibrates the profiler's cost inside the optimizer's steps on its own.
UNPROFILED_OPTIMIZER_STEPS_KEY = "unprofiled_optimizer_step_ns"
# In ``brrr_record``: the wall time of the ``torch.autograd.backward`` calls of each of those steps,
# in ns (their sum, per step): the autograd engine's host time, which the analysis calibrates
# the profiler's cost on in the engine's threads.
UNPROFILED_BACKWARD_KEY = "unprofiled_backward_ns"
