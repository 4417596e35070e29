"""One task per rank trace: in a pool of fresh processes on this machine, or as Ray tasks on a
cluster (docs/architecture.md §13).

The workers are started by ``forkserver`` (``spawn`` where there is none), never forked from the
driver: a forked worker would start with the driver's memory, and the driver may hold others'
results. Each worker process analyzes one trace and exits (``max_tasks_per_child=1``), so a
large trace's memory goes back to the system before the next one is read. A task returns a
picklable summary; the driver keeps only those.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from brrr_trace.errors import BrrrError

T = TypeVar("T")


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _context(task: Callable[..., Any]) -> Any:
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # The fork server imports the task's module once; each worker forks from it already
    # imported (not from the driver, whose memory it would copy).
    context.set_forkserver_preload([task.__module__])
    return context


def in_processes(
    task: Callable[..., T],
    args: Sequence[tuple[Any, ...]],
    jobs: int,
    on_done: Callable[[int], None] | None = None,
) -> list[T]:
    """``task(*a)`` for each ``a``, ``jobs`` at a time (0: one per core), each in its own process.

    A daemonic process (the language server's analysis process) may not start children: there
    the tasks run one after the other in this process."""
    if not args:
        return []
    if multiprocessing.current_process().daemon:
        results = []
        for done, arg in enumerate(args, 1):
            results.append(task(*arg))
            if on_done:
                on_done(done)
        return results
    workers = min(len(args), jobs if jobs > 0 else cores())
    # Python 3.11 on: a fresh process per task; before, a worker lives on to its next rank.
    fresh: dict[str, Any] = {"max_tasks_per_child": 1} if sys.version_info >= (3, 11) else {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=_context(task), **fresh) as pool:
        futures = [pool.submit(task, *arg) for arg in args]
        results = []
        for done, future in enumerate(futures, 1):
            try:
                results.append(future.result())
            except BrokenProcessPool:
                raise BrrrError(
                    f"a worker process analyzing {args[done - 1][0]} stopped abruptly (out of "
                    "memory, or killed); with fewer at a time (--jobs 1) each has more memory."
                ) from None
            if on_done:
                on_done(done)
        return results


def on_ray(
    task: Callable[..., T],
    args: Sequence[tuple[Any, ...]],
    address: str | None,
    on_done: Callable[[int], None] | None = None,
) -> list[T]:
    """``task(*a)`` for each ``a`` as one Ray task each, on the cluster at ``address`` (None or
    "local": a cluster started here for the call). Paths must be readable where the tasks run (a
    shared file system)."""
    try:
        import ray
    except ImportError:
        raise BrrrError(
            "--ray needs Ray: pip install 'brrr-trace[ray]' (or run without --ray to use the "
            "cores of this machine)."
        ) from None
    started = not ray.is_initialized()
    local = address in (None, "", "local")
    if started:
        # A cluster started here runs this same brrr_trace, wherever it was imported from; on
        # a real cluster, brrr-trace is installed on the nodes.
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = os.pathsep.join(dict.fromkeys([here, *(p for p in sys.path if p)]))
        ray.init(
            address=None if local else address,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            runtime_env={"env_vars": {"PYTHONPATH": path}} if local else None,
        )
    try:
        # max_calls=1: a fresh worker process per rank, as in the local pool.
        remote = ray.remote(num_cpus=1, max_retries=0, max_calls=1)(task)
        refs = [remote.remote(*arg) for arg in args]
        order = {ref: i for i, ref in enumerate(refs)}
        results: list[Any] = [None] * len(refs)
        waiting = list(refs)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            for ref in ready:
                results[order[ref]] = _unwrap(ray, ref)
            if on_done:
                on_done(len(refs) - len(waiting))
        return results
    finally:
        if started:
            ray.shutdown()


def _unwrap(ray: Any, ref: Any) -> Any:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as error:
        cause = error.cause if isinstance(error.cause, BaseException) else None
        if isinstance(cause, BrrrError):
            raise BrrrError(str(cause)) from None
        raise
