"""Turning decoded events into the compact columns of ``model.Trace``."""

from __future__ import annotations

import math
from array import array
from typing import Any

import msgspec
import numpy as np

from brrr_trace.options import AnalysisOptions
from brrr_trace.traces.events import ExactNumber
from brrr_trace.traces.model import (
    GPU_KERNEL,
    GPU_MEMCPY,
    GPU_MEMSET,
    NO_ID,
    CpuOps,
    GpuOps,
    HostCalls,
    Problem,
    PyFrames,
    Spans,
    Thread,
)

# Category -> table. Old names (torch 1.8-1.11) and ROCm use the same words in other cases.
_GPU, _HOST, _CPU, _ANNOTATION, _FRAME, _GPU_SPAN, _SKIP = range(7)
_GPU_KIND = {"kernel": GPU_KERNEL, "gpu_memcpy": GPU_MEMCPY, "memcpy": GPU_MEMCPY}
_GPU_KIND |= {"gpu_memset": GPU_MEMSET, "memset": GPU_MEMSET}
_TABLE_OF_CATEGORY = {
    "kernel": _GPU,
    "gpu_memcpy": _GPU,
    "memcpy": _GPU,
    "gpu_memset": _GPU,
    "memset": _GPU,
    "cuda_runtime": _HOST,
    "runtime": _HOST,
    "cuda_driver": _HOST,
    "cpu_op": _CPU,
    "operator": _CPU,
    "user_annotation": _ANNOTATION,
    "python_function": _FRAME,
    "gpu_user_annotation": _GPU_SPAN,
}

# Times are int64 nanoseconds. A start or end at or past 2**62 ns (the year 2116 in epoch
# microseconds) is garbage, not time, and bounding both there leaves room for their sums and
# differences: 9.3e15 µs used to overflow (exact path) or wrap silently (float path).
_MAX_ABS_NS = 1 << 62
_MAX_ABS_US = _MAX_ABS_NS / 1000


_INT64_MAX = (1 << 63) - 1


def _as_int(value: Any, default: int = NO_ID) -> int:
    if type(value) is int:
        return value if -_INT64_MAX <= value <= _INT64_MAX else default
    if isinstance(value, float) and math.isfinite(value) and abs(value) < 9e18:
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("stream "):
            text = text[7:].split()[0] if text[7:].split() else ""
        try:
            number = int(text, 0) if text.startswith(("0x", "0X")) else int(float(text))
        except (ValueError, OverflowError):
            return default
        return number if -_INT64_MAX <= number <= _INT64_MAX else default
    return default


def _as_float(value: Any) -> float:
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def _rounded_ns(us: float) -> int | None:
    """Microseconds as integer ns; None where that is not a finite number (1.8e305 µs is)."""
    ns = us * 1000
    return round(ns) if math.isfinite(ns) else None


def exact_ns(value: Any) -> int | None:
    """Microseconds (number or text) to integer nanoseconds without going through float64."""
    if type(value) is int:
        return value * 1000
    if isinstance(value, float):
        return _rounded_ns(value)
    if isinstance(value, (str, ExactNumber)):
        text = value.strip()
        sign = -1 if text.startswith("-") else 1
        text = text.lstrip("+-")
        if "e" in text or "E" in text:
            as_float = _as_float(text)
            ns = _rounded_ns(as_float)
            return None if ns is None else sign * ns
        whole, _, frac = text.partition(".")
        if not whole.isdigit() and whole != "":
            return None
        if len(whole) > 20:  # out of range anyway, and int() refuses very long digit strings
            return None
        if frac and not frac.isdigit():
            return None
        frac = (frac + "000")[:4]
        ns = int(whole or "0") * 1000 + int(frac[:3]) + (1 if frac[3] >= "5" else 0)
        return sign * ns
    return None


def _valid(order: np.ndarray, ok: np.ndarray) -> np.ndarray:
    if ok.all():
        return order
    rows: np.ndarray = order[ok[order]]
    return rows


_INT32 = np.iinfo(np.int32)
# Rows of a table turned into ns at a time (``_ns``): the temporaries of a whole table of
# millions of events were the load's peak (0.86 GB benchmark trace: ~100 MB above the columns).
_NS_CHUNK = 1 << 18


def _narrow(column: np.ndarray) -> np.ndarray:
    """int32 where every value fits, else the column as it is: values from a trace (sequence
    numbers, call lines, grid sizes) are untrusted, and int32 would wrap a large one."""
    if column.dtype != np.int64 or (
        len(column) and (int(column.min()) < _INT32.min or int(column.max()) > _INT32.max)
    ):
        return column
    return column.astype(np.int32)


def _id_type(entries: int) -> type[np.signedinteger[Any]]:
    """The narrowest column type for ids into a table of ``entries`` (and NO_ID)."""
    return np.int16 if entries < 1 << 15 else np.int32


def _one_value(column: np.ndarray) -> np.ndarray:
    """A column whose rows all hold one value (most traces have no legacy call stacks, no
    collectives and no recorder's call lines: all NO_ID) as a read-only view of that one
    value: no memory per row, for columns alive through the whole analysis."""
    if len(column) < 2 or not (column == column[0]).all():
        return column
    return np.broadcast_to(column[:1].copy(), column.shape)


_CPU_SPARSE_ROWS = ("c_seq_row", "c_fwd_row", "c_stack_row", "c_coll_row")
# Columns kept as (row, value) pairs while events are added (``Columns._sparse``), and the
# three taken from an op's triple of value ids.
_SPARSE = ("c_seq", "c_fwd", "c_stack", "c_coll", "f_line")
_OF_TRIPLE = ("c_dims", "c_types", "c_concrete")


def _remap(ids: list[int]) -> np.ndarray:
    """A part's id -> this table's id (an empty part: one unused slot, so indexing works)."""
    return np.array(ids or [NO_ID], dtype=np.int64)


def _int(value: Any) -> int:
    """``_as_int`` with the plain int, the common case, taken first."""
    if type(value) is int and -_INT64_MAX <= value <= _INT64_MAX:
        return value
    return _as_int(value)


def _triple(value: Any) -> tuple[int, int, int]:
    if isinstance(value, list) and len(value) == 3:
        x, y, z = value
        # Plain ints that fit, the common case, without a call each.
        m = _INT64_MAX
        if (
            type(x) is int
            and type(y) is int
            and type(z) is int
            and -m <= x <= m
            and -m <= y <= m
            and -m <= z <= m
        ):
            return (x, y, z)
        return (_as_int(x, 0), _as_int(y, 0), _as_int(z, 0))
    return (0, 0, 0)


class Columns:
    """Accumulates events table by table; ``finish`` sorts them into numpy arrays."""

    def __init__(self, exact: bool, max_name_chars: int = AnalysisOptions.max_name_chars) -> None:
        self.exact = exact
        self.max_name_chars = max_name_chars
        self.long_names = 0
        self.strings: list[str] = []
        self._string_ids: dict[str, int] = {}
        self.values: list[bytes] = []
        self._value_ids: dict[bytes, int] = {b"": NO_ID, b"null": NO_ID}
        self.thread_keys: list[tuple[Any, Any]] = []
        self._thread_ids: dict[tuple[Any, Any], int] = {}
        self.thread_names: dict[tuple[Any, Any], str] = {}
        self.process_names: dict[Any, str] = {}
        time_code = "q" if exact else "d"
        # Ids (names, threads, values) are int32, unsorted and sorted: a trace has far fewer
        # than 2**31 of each, and the columns are alive through the whole analysis (on the
        # 0.86 GB benchmark trace int64 ids took 40 MB more).
        # gpu
        self.g_dev, self.g_stream, self.g_name = array("q"), array("q"), array("i")
        self.g_ts, self.g_dur = array(time_code), array(time_code)
        self.g_kind, self.g_corr, self.g_bytes = array("b"), array("q"), array("q")
        self.g_grid, self.g_block, self.g_graph = array("q"), array("q"), array("b")
        # host calls
        self.h_thread, self.h_name, self.h_corr = array("i"), array("i"), array("q")
        self.h_ts, self.h_dur = array(time_code), array(time_code)
        # cpu ops and annotations
        self.c_thread, self.c_name, self.c_ann = array("i"), array("i"), array("b")
        self.c_ts, self.c_dur = array(time_code), array(time_code)
        # An op's (input dims, types, concrete inputs) value ids as one id into ``triples``:
        # most ops repeat a triple seen before, and one append costs less than three.
        self.c_triple = array("i")
        self.triples: list[tuple[int, int, int]] = [(NO_ID, NO_ID, NO_ID)]
        self._triple_ids: dict[tuple[int, int, int], int] = {(NO_ID, NO_ID, NO_ID): 0}
        self._triple_of_texts: dict[bytes, int] = {}
        # Columns that most rows leave at NO_ID (sequence numbers and forward threads: two ops
        # in three; legacy stacks, collectives and the recorder's call lines: nearly all) are
        # kept as (row, value) pairs of the rows that have one: on the 0.86 GB benchmark trace
        # the dense columns were ~30 MB of the load's peak, and an append per row per column.
        self.c_seq_row, self.c_seq_val = array("i"), array("q")
        self.c_fwd_row, self.c_fwd_val = array("i"), array("q")
        self.c_stack_row, self.c_stack_val = array("i"), array("i")
        self.c_coll_row, self.c_coll_val = array("i"), array("i")
        # python frames
        self.f_thread, self.f_name = array("i"), array("i")
        self.f_line_row, self.f_line_val = array("i"), array("q")
        self.f_ts, self.f_dur = array(time_code), array(time_code)
        # gpu annotations
        self.s_dev, self.s_name = array("q"), array("i")
        self.s_ts, self.s_dur = array(time_code), array(time_code)
        self._lengths: dict[str, int] = {}  # rows of each table, once finishing
        self.skipped_categories: dict[str, int] = {}
        self.bad_times = 0
        self.bad_durations = 0
        self.negative_durations = 0
        self.events = 0

    def intern(self, text: Any) -> int:
        """The id of an event name; a name longer than ``max_name_chars`` is kept cut there, so
        that what every analyzer does per name (regexes, prefix tests) costs a bounded time."""
        if not isinstance(text, str):
            text = "" if text is None else str(text)
        ids = self._string_ids
        found = ids.get(text)
        if found is None:
            found = ids[text] = len(self.strings)
            if len(text) > self.max_name_chars:
                self.long_names += 1
                text = text[: self.max_name_chars] + "…"
            self.strings.append(text)
        return found

    def _intern_whole(self, text: str) -> int:
        """A legacy "Call stack": many frames in one string, split later, so never cut."""
        ids = self._string_ids
        found = ids.get(text)
        if found is None:
            found = ids[text] = len(self.strings)
            self.strings.append(text)
        return found

    def _value(self, raw: bytes) -> int:
        """The id of a value by its JSON text (b"" and b"null", no value, are NO_ID)."""
        found = self._value_ids.get(raw)
        if found is None:
            found = self._value_ids[raw] = len(self.values)
            self.values.append(raw)
        return found

    def _thread(self, pid: Any, tid: Any) -> int:
        key = (pid, tid)
        found = self._thread_ids.get(key)
        if found is None:
            found = self._thread_ids[key] = len(self.thread_keys)
            self.thread_keys.append(key)
        return found

    def _exact_time(self, value: Any) -> int | None:
        ns = exact_ns(value)
        return ns if ns is not None and abs(ns) < _MAX_ABS_NS else None

    def add(self, events: list[Any]) -> None:
        table_of = _TABLE_OF_CATEGORY
        intern_ids = self._string_ids
        intern = self.intern
        thread_ids = self._thread_ids
        thread = self._thread
        exact = self.exact
        f_ts_column = self.f_ts
        f_thread, f_name, f_ts = self.f_thread.append, self.f_name.append, f_ts_column.append
        f_dur = self.f_dur.append
        c_ts_column = self.c_ts
        c_thread, c_name, c_ann = self.c_thread.append, self.c_name.append, self.c_ann.append
        c_ts, c_dur = c_ts_column.append, self.c_dur.append
        c_triple = self.c_triple.append
        seq_row, seq_val = self.c_seq_row.append, self.c_seq_val.append
        fwd_row, fwd_val = self.c_fwd_row.append, self.c_fwd_val.append
        triple_of_texts = self._triple_of_texts
        join = b"\x00".join
        h_thread, h_name, h_corr = self.h_thread.append, self.h_name.append, self.h_corr.append
        h_ts, h_dur = self.h_ts.append, self.h_dur.append
        self.events += len(events)
        for ev in events:
            ph = ev.ph
            if ph != "X":
                if ph == "M":
                    self._metadata(ev)
                continue
            cat = ev.cat
            table = table_of.get(cat) if type(cat) is str else None
            if table is None:
                table, cat = self._unusual_category(ev)
                if table == _SKIP:
                    continue
            ts, dur = ev.ts, ev.dur
            if exact:
                ts, dur = self._exact_time(ts), self._exact_time(dur)
                if ts is None:
                    self.bad_times += 1
                    continue
                if dur is None:
                    self.bad_durations += ev.dur is not None  # a missing dur is a 0 one
                    dur = 0
            key = (ev.pid, ev.tid)
            name = ev.name
            args = ev.args
            if table == _FRAME:
                tix = thread_ids.get(key)
                f_thread(tix if tix is not None else thread(*key))
                nix = intern_ids.get(name) if type(name) is str else None
                f_name(nix if nix is not None else intern(name))
                f_ts(ts)
                f_dur(dur)
                if args is not None and args.call_line is not None:
                    self._sparse("f_line", len(f_ts_column) - 1, _as_int(args.call_line))
            elif table in (_CPU, _ANNOTATION):
                tix = thread_ids.get(key)
                c_thread(tix if tix is not None else thread(*key))
                nix = intern_ids.get(name) if type(name) is str else None
                c_name(nix if nix is not None else intern(name))
                c_ann(table == _ANNOTATION)
                c_ts(ts)
                c_dur(dur)
                if args is None:
                    c_triple(0)  # (NO_ID, NO_ID, NO_ID)
                    continue
                # Values by their JSON text; b"" (absent) and b"null" are seeded as NO_ID.
                # An op's three values are looked up as one key: most ops repeat a
                # (dims, types, concrete) seen before, and each bytes() copy and lookup
                # is a good part of an op's cost. JSON text holds no NUL byte, so the
                # joined key is the three texts unambiguously.
                dims = args.input_dims
                texts = join(
                    (dims or args.input_dims_legacy, args.input_types, args.concrete_inputs)
                )
                tri = triple_of_texts.get(texts)
                if tri is None:
                    tri = triple_of_texts[texts] = self._triple_id(self._value_triple(args))
                c_triple(tri)
                seq, fwd = args.sequence, args.fwd_thread
                if seq is not None:
                    # Plain ints inline: a call per field is a good part of an op's cost.
                    if type(seq) is not int or not -_INT64_MAX <= seq <= _INT64_MAX:
                        seq = _as_int(seq)
                    if seq != NO_ID:
                        seq_row(len(c_ts_column) - 1)
                        seq_val(seq)
                if fwd is not None:
                    if type(fwd) is not int or not -_INT64_MAX <= fwd <= _INT64_MAX:
                        fwd = _as_int(fwd)
                    if fwd != NO_ID:
                        fwd_row(len(c_ts_column) - 1)
                        fwd_val(fwd)
                if args.call_stack is not None:
                    self._sparse("c_stack", len(c_ts_column) - 1, self._stack_id(args.call_stack))
                if args.collective is not None:
                    self._sparse("c_coll", len(c_ts_column) - 1, self._collective(args))
            elif table == _HOST:
                tix = thread_ids.get(key)
                h_thread(tix if tix is not None else thread(*key))
                nix = intern_ids.get(name) if type(name) is str else None
                h_name(nix if nix is not None else intern(name))
                h_ts(ts)
                h_dur(dur)
                corr = args.correlation if args is not None else None
                h_corr(
                    corr
                    if type(corr) is int and -_INT64_MAX <= corr <= _INT64_MAX
                    else _as_int(corr)
                )
            elif table == _GPU:
                self._gpu(ev, cat, ts, dur)
            elif table == _GPU_SPAN:
                device = _as_int(args.device) if args is not None else NO_ID
                self.s_dev.append(device if device != NO_ID else _as_int(ev.pid))
                self.s_name.append(intern(name))
                self.s_ts.append(ts)
                self.s_dur.append(dur)

    def _sparse(self, column: str, row: int, value: int) -> None:
        """A row's value of a column kept as (row, value) pairs; NO_ID, the default, is not
        kept."""
        if value != NO_ID:
            getattr(self, column + "_row").append(row)
            getattr(self, column + "_val").append(value)

    def _triple_id(self, ids: tuple[int, int, int]) -> int:
        found = self._triple_ids.get(ids)
        if found is None:
            found = self._triple_ids[ids] = len(self.triples)
            self.triples.append(ids)
        return found

    def absorb(self, part: Columns) -> None:
        """Append the columns of the next run, decoded by a ``Columns`` of its own elsewhere
        (traces/parallel.py): its names, values and threads renumbered into these tables in
        the order it met them, which is the order a single ``add`` of the run would have."""
        cut = self.max_name_chars
        # A name longer than the cut was kept whole only when it was a legacy "Call stack".
        strings = _remap(
            [
                self._intern_whole(text)
                if len(text) > cut and part.strings[index] == text
                else self.intern(text)
                for text, index in part._string_ids.items()
            ]
        )
        values = _remap([self._value(raw) for raw in part.values])
        threads = _remap([self._thread(*key) for key in part.thread_keys])
        value_of = values.tolist()
        triples = _remap(
            [
                self._triple_id(
                    (
                        value_of[d] if d >= 0 else NO_ID,
                        value_of[t] if t >= 0 else NO_ID,
                        value_of[c] if c >= 0 else NO_ID,
                    )
                )
                for d, t, c in part.triples
            ]
        )
        renumbered = {
            "g_name": strings,
            "h_name": strings,
            "c_name": strings,
            "f_name": strings,
            "s_name": strings,
            "c_stack_val": strings,
            "c_triple": triples,
            "c_coll_val": values,
            "h_thread": threads,
            "c_thread": threads,
            "f_thread": threads,
        }
        # The part's rows of its sparse columns follow this table's rows (taken before any
        # column grows).
        shift = {name: len(self.c_ts) for name in _CPU_SPARSE_ROWS}
        shift["f_line_row"] = len(self.f_ts)
        for name, column in vars(part).items():
            if not isinstance(column, array) or not column:
                continue
            mine = getattr(self, name)
            ids = renumbered.get(name)
            if ids is None:
                by = shift.get(name)
                if by is None:
                    mine.extend(column)
                else:
                    rows = np.frombuffer(column, dtype=column.typecode) + by
                    mine.frombytes(rows.astype(column.typecode).tobytes())
                continue
            local = np.frombuffer(column, dtype=column.typecode)
            found = np.where(local >= 0, ids[np.maximum(local, 0)], NO_ID)
            mine.frombytes(found.astype(column.typecode).tobytes())
        self.thread_names.update(part.thread_names)
        self.process_names.update(part.process_names)
        for label, count in part.skipped_categories.items():
            self.skipped_categories[label] = self.skipped_categories.get(label, 0) + count
        self.bad_times += part.bad_times
        self.bad_durations += part.bad_durations
        self.events += part.events

    def _value_triple(self, args: Any) -> tuple[int, int, int]:
        """The ids of an op's input dims, types and concrete inputs, interned in that order."""
        return (
            self._value(bytes(args.input_dims) or bytes(args.input_dims_legacy)),
            self._value(bytes(args.input_types)),
            self._value(bytes(args.concrete_inputs)),
        )

    def _stack_id(self, stack: Any) -> int:
        return self._intern_whole(stack) if isinstance(stack, str) else NO_ID

    def _collective(self, args: Any) -> int:
        if args.collective is None:
            return NO_ID
        return self._value(
            msgspec.json.encode(
                [
                    args.collective,
                    args.in_nelems,
                    args.out_nelems,
                    args.dtype,
                    args.group_name,
                    args.group_size,
                ]
            )
        )

    def _unusual_category(self, ev: Any) -> tuple[int, str]:
        cat = ev.cat
        if type(cat) is str:
            lowered = cat.lower()
            table = _TABLE_OF_CATEGORY.get(lowered)
            if table is not None:
                return table, lowered
        elif cat is None and isinstance(ev.pid, str) and ev.pid.endswith("functions"):
            # Legacy (use_kineto=False) traces: "CPU functions" / "CUDA functions" lanes.
            return (_GPU if ev.pid.startswith("CUDA") else _CPU), "kernel"
        label = str(cat)
        self.skipped_categories[label] = self.skipped_categories.get(label, 0) + 1
        return _SKIP, label

    def _gpu(self, ev: Any, cat: str, ts: Any, dur: Any) -> None:
        args = ev.args
        device = stream = NO_ID
        corr = nbytes = NO_ID
        grid = block = (0, 0, 0)
        graph = False
        if args is not None:
            device, stream = _int(args.device), _int(args.stream)
            corr, nbytes = _int(args.correlation), _int(args.nbytes)
            grid = _triple(args.grid)
            block = _triple(args.block)
            graph = args.graph_id not in (None, 0, "0", "")
        if device == NO_ID:
            device = _as_int(ev.pid)
        if stream == NO_ID:
            stream = _as_int(ev.tid)
        self.g_dev.append(device)
        self.g_stream.append(stream)
        self.g_name.append(self.intern(ev.name))
        self.g_ts.append(ts)
        self.g_dur.append(dur)
        self.g_kind.append(_GPU_KIND.get(cat, GPU_KERNEL))
        self.g_corr.append(corr)
        self.g_bytes.append(nbytes)
        self.g_grid.extend(grid)
        self.g_block.extend(block)
        self.g_graph.append(graph)

    def _metadata(self, ev: Any) -> None:
        args = ev.args
        label = args.name if args is not None else None
        if not isinstance(label, str):
            return
        if ev.name == "thread_name":
            self.thread_names[(ev.pid, ev.tid)] = label
        elif ev.name == "process_name":
            self.process_names[ev.pid] = label

    # -- finishing -------------------------------------------------------------------------

    def _ns(self, ts: array[Any], dur: array[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Start and end in integer ns, and the mask of rows with a usable start; made a chunk
        of rows at a time (every step is per row), so the temporaries stay small."""
        time_type = np.int64 if self.exact else np.float64
        ts_all, dur_all = np.asarray(ts, dtype=time_type), np.asarray(dur, dtype=time_type)
        n = len(ts_all)
        start = np.empty(n, dtype=np.int64)
        end = np.empty(n, dtype=np.int64)
        valid = np.empty(n, dtype=bool)
        for lo in range(0, n, _NS_CHUNK):
            part = slice(lo, lo + _NS_CHUNK)
            start[part], end[part], valid[part] = self._ns_of(ts_all[part], dur_all[part])
        return start, end, valid

    def _ns_of(self, ts: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.exact:
            start, length = ts, dur
            negative = length < 0
            self.negative_durations += int(np.count_nonzero(negative))
            length = np.where(negative, 0, length)
            # Both below 2**62 (``_exact_time``): the sum cannot overflow, only pass the bound.
            past = start + length >= _MAX_ABS_NS
            self.bad_durations += int(np.count_nonzero(past))
            length = np.where(past, 0, length)
            return start, start + length, np.ones(len(start), dtype=bool)
        t, d = ts, dur
        valid = np.isfinite(t) & (np.abs(t) < _MAX_ABS_US)
        self.bad_times += int(len(t) - np.count_nonzero(valid))
        t = np.where(valid, t, 0.0)
        with np.errstate(invalid="ignore"):
            usable = np.isfinite(d) & (t + np.maximum(d, 0.0) < _MAX_ABS_US)
        self.bad_durations += int(np.count_nonzero(valid & ~usable))
        d = np.where(usable, d, 0.0)
        negative = d < 0
        self.negative_durations += int(np.count_nonzero(negative))
        d = np.where(negative, 0.0, d)
        whole = np.floor(t)
        start = whole.astype(np.int64) * 1000 + np.rint((t - whole) * 1000).astype(np.int64)
        # Round the end on its own so that back-to-back events keep touching, never overlap.
        end_us = t + d
        whole_end = np.floor(end_us)
        end = whole_end.astype(np.int64) * 1000 + np.rint((end_us - whole_end) * 1000).astype(
            np.int64
        )
        return start, np.maximum(end, start), valid

    def _sorted_sparse(self, name: str, order: np.ndarray) -> np.ndarray:
        """A sparse column (``_sparse``) made whole, NO_ID where a row has no value, in
        ``order``; its pairs let go."""
        rows, values = getattr(self, name + "_row"), getattr(self, name + "_val")
        setattr(self, name + "_row", array(rows.typecode))
        setattr(self, name + "_val", array(values.typecode))
        if not rows:
            return np.full(len(order), NO_ID, dtype=np.int64)
        dense = np.full(self._lengths[name[:2]], NO_ID, dtype=np.int64)
        dense[np.frombuffer(rows, dtype=rows.typecode)] = np.frombuffer(
            values, dtype=values.typecode
        )
        out: np.ndarray = dense[order]
        return out

    def _times(self, prefix: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A table's start and end ns (``_ns``), its unsorted ts and dur let go."""
        ts, dur = getattr(self, prefix + "ts"), getattr(self, prefix + "dur")
        setattr(self, prefix + "ts", array(ts.typecode))
        setattr(self, prefix + "dur", array(dur.typecode))
        return self._ns(ts, dur)

    def _sorted(self, name: str, order: np.ndarray, dtype: Any = np.int64) -> np.ndarray:
        """A column in ``order``, widened to ``dtype``; the unsorted column is let go at once, so
        that sorting a table holds one column twice, not the whole table."""
        if name in _SPARSE:
            return self._sorted_sparse(name, order).astype(dtype, copy=False)
        if name in _OF_TRIPLE:
            k = _OF_TRIPLE.index(name)
            ids = np.array([triple[k] for triple in self.triples], dtype=np.int64)
            which = np.frombuffer(self.c_triple, dtype=self.c_triple.typecode)
            picked: np.ndarray = ids[which[order]]
            return picked.astype(dtype, copy=False)
        column = getattr(self, name)
        setattr(self, name, array(column.typecode))
        if name.endswith(("_grid", "_block")):
            out: np.ndarray = np.asarray(column).reshape(-1, 3)[order]
        else:
            out = np.asarray(column)[order]
        return out.astype(dtype, copy=False)

    def finish(self) -> dict[str, Any]:
        take = self._sorted
        # The tables' lengths, for their sparse columns (``_times`` lets the ts go first).
        self._lengths = {"c_": len(self.c_ts), "f_": len(self.f_ts)}
        # Ids are int16 where their table (names, values, threads) has fewer than 2**15
        # entries, so that every id of it fits, whichever rows a column holds.
        names, values = _id_type(len(self.strings)), _id_type(len(self.values))
        thread_ids = _id_type(len(self.thread_keys))
        g_start, g_end, ok = self._times("g_")
        order = _valid(np.lexsort((g_start, np.asarray(self.g_dev))), ok)
        gpu = GpuOps(
            device=_one_value(_narrow(take("g_dev", order))),
            stream=_one_value(_narrow(take("g_stream", order))),
            start_ns=g_start[order],
            end_ns=g_end[order],
            name=take("g_name", order, names),
            kind=take("g_kind", order, np.int8),
            correlation=take("g_corr", order),
            grid=_narrow(take("g_grid", order)),
            block=_narrow(take("g_block", order)),
            nbytes=take("g_bytes", order),
            graph=take("g_graph", order, bool),
        )
        del g_start, g_end
        h_start, h_end, ok = self._times("h_")
        order = _valid(np.argsort(h_start, kind="stable"), ok)
        host = HostCalls(
            thread=_one_value(take("h_thread", order, thread_ids)),
            start_ns=h_start[order],
            end_ns=h_end[order],
            name=take("h_name", order, names),
            correlation=take("h_corr", order),
        )
        del h_start, h_end
        c_start, c_end, ok = self._times("c_")
        # Outer ops first when two start together, so containment scans see parents first.
        order = _valid(np.lexsort((-c_end, c_start)), ok)
        c_start = c_start[order]
        c_end = c_end[order]
        cpu = CpuOps(
            thread=_one_value(take("c_thread", order, thread_ids)),
            start_ns=c_start,
            end_ns=c_end,
            name=take("c_name", order, names),
            annotation=take("c_ann", order, bool),
            sequence=_narrow(take("c_seq", order)),
            fwd_thread=_narrow(take("c_fwd", order)),
            input_dims=take("c_dims", order, values),
            input_types=take("c_types", order, values),
            concrete_inputs=take("c_concrete", order, values),
            call_stack=_one_value(take("c_stack", order, names)),
            collective=_one_value(take("c_coll", order, values)),
        )
        self.c_triple = array(self.c_triple.typecode)
        del c_start, c_end
        f_start, f_end, ok = self._times("f_")
        order = _valid(np.lexsort((-f_end, f_start)), ok)
        f_start = f_start[order]
        f_end = f_end[order]
        frames = PyFrames(
            thread=_one_value(take("f_thread", order, thread_ids)),
            start_ns=f_start,
            end_ns=f_end,
            name=take("f_name", order, names),
            call_line=_one_value(_narrow(take("f_line", order))),
        )
        del f_start, f_end
        s_start, s_end, ok = self._times("s_")
        order = _valid(np.argsort(s_start, kind="stable"), ok)
        spans = Spans(
            where=_one_value(_narrow(take("s_dev", order))),
            start_ns=s_start[order],
            end_ns=s_end[order],
            name=take("s_name", order, names),
        )
        threads = tuple(
            Thread(pid=pid, tid=tid, name=self.thread_names.get((pid, tid), ""))
            for pid, tid in self.thread_keys
        )
        return {
            "gpu": gpu,
            "host_calls": host,
            "cpu_ops": cpu,
            "frames": frames,
            "gpu_annotations": spans,
            "threads": threads,
            "strings": tuple(self.strings),
            "values": tuple(self.values),
        }

    def problems(self) -> list[Problem]:
        found = []
        if self.bad_times:
            found.append(
                Problem(
                    "bad-timestamp",
                    self.bad_times,
                    "events whose ts is missing, not a number or out of range were dropped",
                )
            )
        if self.long_names:
            found.append(
                Problem(
                    "long-name",
                    self.long_names,
                    f"names longer than {self.max_name_chars:,} characters were cut there "
                    "(AnalysisOptions.max_name_chars)",
                )
            )
        if self.bad_durations:
            found.append(
                Problem(
                    "bad-duration",
                    self.bad_durations,
                    "events whose dur is not a number or ends past the year 2116 were kept "
                    "with a duration of 0",
                )
            )
        if self.negative_durations:
            found.append(
                Problem(
                    "negative-duration",
                    self.negative_durations,
                    "events with a negative dur were kept with a duration of 0",
                )
            )
        return found
