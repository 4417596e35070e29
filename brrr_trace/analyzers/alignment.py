"""Which statement issued each event of a frame invocation: a global alignment
(docs/architecture.md §5).

The events directly inside one invocation of a function (child frames and ATen ops, in order)
are aligned with the slots of its body (``source.Body``: what each statement can produce, in
evaluation order). A path through the body moves forward, skips slots (branches not taken,
calls that leave no event, early returns) and jumps back to the start of a loop that it is in.
Dynamic programming (Viterbi) finds the path that matches the events best: a match scores by
how specific it is (a module of the known class over a module of any class, a name over a
generic wrapper), each skipped slot and each loop jump costs a little, so that among equally
good paths the most direct one wins. A greedy walk cannot undo an early wrong choice; this can:
``for block in self.blocks: x = block(x)`` followed by ``self.head(x)`` puts every block on
the loop's line and the last module on the head.
"""

from __future__ import annotations

import numpy as np

from brrr_trace.analyzers.source import Body, Observed

_SKIP = 0.001  # per slot skipped
_JUMP = 0.01  # per jump back to a loop start
_ANCHOR = 10.0  # an event whose line is known (the recorder's call line) sits on that line
# Beyond this many matchable events the table would be large; walk greedily instead.
_MAX_EVENTS = 20_000


def align(
    body: Body, seen: tuple[Observed, ...], anchors: tuple[int | None, ...] | None = None
) -> tuple[int | None, ...]:
    """The line of each observed child event, in order; None where the source cannot tell."""
    slots = body.slots
    n = len(slots)
    lines: list[int | None] = [None] * len(seen)
    if n == 0 or not seen:
        return tuple(anchors) if anchors is not None else tuple(lines)
    slot_lines = np.array([s.line for s in slots], dtype=np.int64)
    by_event: dict[Observed, np.ndarray] = {}
    scores: list[np.ndarray] = []
    picked: list[int] = []
    for k, event in enumerate(seen):
        anchor = anchors[k] if anchors is not None else None
        if anchor is not None:
            lines[k] = anchor
            on_line = slot_lines == anchor
            if not on_line.any():
                continue
            row = np.where(on_line, _ANCHOR, 0.0)
        else:
            cached = by_event.get(event)
            if cached is None:
                cached = by_event[event] = np.array([s.matches(event) for s in slots], dtype=float)
            row = cached
            if not row.any():
                continue
        scores.append(row)
        picked.append(k)
    if not picked:
        return tuple(lines)
    if len(picked) > _MAX_EVENTS:
        path = _greedy(np.array(scores), body.loops)
    else:
        path = _viterbi(np.array(scores), body.loops)
    for k, slot in zip(picked, path, strict=True):
        if slot is not None and lines[k] is None:
            lines[k] = slots[slot].line
    return tuple(_fill(lines))


def _viterbi(scores: np.ndarray, loops: tuple[tuple[int, int], ...]) -> list[int | None]:
    """Best path: for each event the slot it matched, or None (left unmatched)."""
    m, n = scores.shape
    idx = np.arange(n, dtype=float)
    neg = -np.inf
    # State j = the slot of the last matched event; state n = nothing matched yet.
    prev = np.full(n + 1, neg)
    prev[n] = 0.0
    history = np.empty((m, n + 1))
    arrivals = np.empty((m, n))  # kept for the backtrack, which asks for the same again
    for k in range(m):
        history[k] = prev
        arrive = arrivals[k] = _arrivals(prev, idx, loops)
        matched = np.where(scores[k] > 0, scores[k] + arrive, neg)
        new = prev.copy()  # unmatched: the state stays
        better = matched > new[:n]
        new[:n][better] = matched[better]
        prev = new
    # Backtrack.
    state = int(np.argmax(prev))
    path: list[int | None] = [None] * m
    for k in range(m - 1, -1, -1):
        before = history[k]
        if state == n or before[state] >= _value_at(scores[k], arrivals[k], state):
            continue  # this event was left unmatched; the state came from before it
        path[k] = state
        state = _came_from(before, state, idx, loops)
    return path


def _arrivals(prev: np.ndarray, idx: np.ndarray, loops: tuple[tuple[int, int], ...]) -> np.ndarray:
    """For each slot j: the best score of a path that reaches j next, from any state."""
    n = len(idx)
    lifted = prev[:n] + _SKIP * idx
    # Forward from a slot i < j: prev[i] - SKIP * (j - i - 1); from the start: prev[n] - SKIP * j.
    ahead = np.concatenate(([-np.inf], np.maximum.accumulate(lifted)[:-1]))
    best: np.ndarray = np.maximum(ahead - _SKIP * (idx - 1), prev[n] - _SKIP * idx)
    for a, b in loops:
        if b <= a:
            continue
        # Back from a slot i in [j, b) of the loop: to its end, then from its start to j.
        tail = np.maximum.accumulate(lifted[a:b][::-1])[::-1]
        back = tail - _JUMP - _SKIP * (b - 1 - a) - _SKIP * idx[a:b]
        best[a:b] = np.maximum(best[a:b], back)
    return best


def _value_at(score: np.ndarray, arrive: np.ndarray, j: int) -> float:
    if score[j] <= 0:
        return -np.inf
    return float(score[j] + arrive[j])


def _came_from(
    before: np.ndarray, j: int, idx: np.ndarray, loops: tuple[tuple[int, int], ...]
) -> int:
    """The state the best path to slot j came from (the same costs as ``_arrivals``)."""
    n = len(idx)
    cost = np.full(n + 1, -np.inf)
    cost[:j] = -_SKIP * (j - 1 - idx[:j])
    cost[n] = -_SKIP * j
    for a, b in loops:
        if a <= j < b:
            i = idx[j:b]
            back = -_JUMP - _SKIP * ((b - 1 - i) + (j - a))
            cost[j:b] = np.maximum(cost[j:b], back)
    return int(np.argmax(before + cost))


def _greedy(scores: np.ndarray, loops: tuple[tuple[int, int], ...]) -> list[int | None]:
    """A forward walk for very long invocations: the best match reachable from where it is."""
    m, n = scores.shape
    idx = np.arange(n, dtype=float)
    state = n
    path: list[int | None] = []
    for k in range(m):
        prev = np.full(n + 1, -np.inf)
        prev[state] = 0.0
        value = np.where(scores[k] > 0, scores[k] + _arrivals(prev, idx, loops), -np.inf)
        j = int(np.argmax(value))
        if np.isfinite(value[j]):
            path.append(j)
            state = j
        else:
            path.append(None)
    return path


def _fill(lines: list[int | None]) -> list[int | None]:
    """An event no slot explains belongs to the statement whose events surround it; between
    two statements, to the one about to run (operands are evaluated before the call)."""
    out = list(lines)
    after: int | None = None
    for k in range(len(lines) - 1, -1, -1):
        if lines[k] is not None:
            after = lines[k]
        elif after is not None:
            out[k] = after
    before: int | None = None
    for k, line in enumerate(out):
        if line is not None:
            before = line
        elif before is not None:
            out[k] = before
    return out
