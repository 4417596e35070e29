"""The one vocabulary every layer shares: kinds of GPU work, regimes, idle causes, precisions."""

from __future__ import annotations

from enum import Enum


class _Word(str, Enum):
    """A string enum whose value is the word used in the report contract."""

    def __str__(self) -> str:
        return self.value


class KernelKind(_Word):
    """What a GPU activity does. MEMCPY is a copy; it never means "memory-bound"."""

    GEMM = "gemm"
    CONV = "conv"
    ATTENTION = "attention"
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    NORM = "norm"
    SOFTMAX = "softmax"
    COMMUNICATION = "communication"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    OTHER = "other"


class Regime(_Word):
    """Horace He's three regimes, and communication: where the time of a line goes.

    Time on collectives (their GPU kernels, and the GPU idle while the host sits in a CPU-side
    collective) is neither compute- nor memory-bound: much of it is one rank waiting for the
    others, and its fixes are of another kind (docs/architecture.md §12)."""

    COMPUTE = "compute"
    MEMORY = "memory"
    OVERHEAD = "overhead"
    COMMUNICATION = "communication"


class IdleCause(_Word):
    """Why the GPU sat idle in a gap (docs/architecture.md §4)."""

    SYNC = "sync"
    DATALOADER = "dataloader"
    HOST = "host"
    LAUNCH = "launch"
    OTHER = "other"
    COLLECTIVE = "collective"  # the host sat in a collective with no GPU kernel (gloo, CPU)


class Precision(_Word):
    """How precisely a result is placed on a source line (docs/architecture.md §5)."""

    EXACT = "exact"
    RECOVERED = "recovered"
    FUNCTION = "function"
    OP = "op"  # no Python frame: the top-level op (and record_function region) that ran it
