"""Which line of the program was running, sampled from outside: the check of idle ownership.

    python line_samples.py SAMPLES.json [--interval-us 100] -- script.py [args ...]

runs ``script.py`` as ``__main__`` (it profiles itself with ``--profile``, as usual) while a
thread samples the main thread's stack every ``--interval-us``: the innermost frame that belongs
to the programs of this folder, and its *current* line (``f_lineno``). Samples are written as
``[monotonic ns, file, line]``; ``torch.profiler.profile.step`` calls are logged too, so that
the sample clock can be matched to the trace's (ProfilerStep#N starts at the Nth call). Nothing
here touches torch's dispatch: the trace is a plain profile of the program, a little slowed by the
sampling thread taking the GIL.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_OWN = os.path.abspath(__file__)


def _program_file(filename: str, cache: dict[str, bool]) -> bool:
    verdict = cache.get(filename)
    if verdict is None:
        path = os.path.abspath(filename)
        verdict = (
            path.startswith(HERE + os.sep)
            and path != _OWN
            and "-packages" + os.sep not in path
            and path.endswith(".py")
        )
        cache[filename] = verdict
    return verdict


def main() -> int:
    argv = sys.argv[1:]
    interval_us = 100
    if len(argv) >= 2 and argv[1] == "--interval-us":
        interval_us = int(argv[2])
        argv = [argv[0], *argv[3:]]
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    out_path, script, script_args = argv[0], argv[2], argv[3:]
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    samples: list[tuple[int, str, int]] = []
    steps: list[int] = []
    done = threading.Event()
    main_id = threading.main_thread().ident

    def sample() -> None:
        cache: dict[str, bool] = {}
        while not done.wait(interval_us / 1e6):
            frame = sys._current_frames().get(main_id)
            while frame is not None and not _program_file(frame.f_code.co_filename, cache):
                frame = frame.f_back
            if frame is not None:
                rel = os.path.relpath(os.path.abspath(frame.f_code.co_filename), HERE)
                samples.append((time.monotonic_ns(), rel, frame.f_lineno))

    import torch.profiler

    original_step = torch.profiler.profile.step

    def step(self, *args, **kwargs):
        steps.append(time.monotonic_ns())
        return original_step(self, *args, **kwargs)

    torch.profiler.profile.step = step
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        done.set()
        sampler.join()
        with open(out_path, "w") as handle:
            json.dump({"interval_us": interval_us, "steps_ns": steps, "samples": samples}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
