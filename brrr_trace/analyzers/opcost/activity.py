"""Costs read from a GPU activity itself, for when its op's shapes are not there to read.

An ATen elementwise kernel's element count follows from its launch grid and template arguments
(``record_shapes`` off); a memcpy event records its byte count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from brrr_trace.analyzers.kernels import is_host_copy, kernel_dtype, template_args
from brrr_trace.analyzers.opcost.args import bytes_per_element
from brrr_trace.analyzers.opcost.cost import UNKNOWN_COST, OpCost

_ATEN_ELEMENTWISE = re.compile(
    r"(?<![A-Za-z0-9_])(vectorized_elementwise_kernel|unrolled_elementwise_kernel"
    r"|elementwise_kernel_manual_unroll|elementwise_kernel)<"
)
_TENSOR_COUNT = re.compile(r"(?:Array|array)<char\s*\*,\s*(\d+)(?:ul|u)?>")


def _int_arg(text: str) -> int | None:
    m = re.fullmatch(r"(\d+)(?:ul|u|l)?", text.strip(), re.I)
    return int(m.group(1)) if m else None


def kernel_cost_from_launch(
    name: str, grid: Sequence[int] | None, block: Sequence[int] | None
) -> OpCost:
    """Shape-free cost of a PyTorch elementwise kernel from its launch configuration.

    Without ``record_shapes`` the element count of ATen's elementwise kernels is still
    recoverable: ``numel ≈ grid.x · block.x · N`` (reference §3 item 5; exact for large
    tensors, the last block is partial), with N the elements per thread. Measured on the public
    traces: ``elementwise_kernel<nt, vt>`` and ``…_manual_unroll<nt, vt>`` → vt;
    ``vectorized_elementwise_kernel<v>`` → max(v, 4) (older PyTorch keeps 4 per thread for v=2,
    newer uses 8 for 16-bit types and says so in v); ``unrolled_elementwise_kernel`` → its third
    template argument when it is a number, else 4. Bytes assume every tensor of the
    ``Array<char*, K>`` has the kernel's dtype. Other kernels give all-None.
    """
    if not isinstance(name, str):
        return UNKNOWN_COST
    m = _ATEN_ELEMENTWISE.search(name)
    if m is None:
        return UNKNOWN_COST
    gx = _launch_product(grid)
    bx = _launch_x(block)
    if gx is None or bx is None:
        return UNKNOWN_COST
    args = template_args(name, m.end() - 1) or []
    family = m.group(1)
    per_thread: int | None
    if family == "vectorized_elementwise_kernel":
        v = _int_arg(args[0]) if args else None
        per_thread = max(v, 4) if v else None
    elif family == "unrolled_elementwise_kernel":
        per_thread = (_int_arg(args[2]) if len(args) > 2 else None) or 4
    else:
        per_thread = _int_arg(args[1]) if len(args) > 1 else None
    if not per_thread:
        return UNKNOWN_COST
    numel = gx * bx * per_thread
    dtype = kernel_dtype(name)
    tensors_m = _TENSOR_COUNT.search(name)
    if tensors_m:
        tensors = int(tensors_m.group(1))
    else:  # the strided path names no Array<char*, K>; a binary functor reads two tensors
        tensors = 3 if re.search(r"(?<![AB]Unary)BinaryFunctor|CUDAFunctor_", name) else 2
    low = name.lower()
    is_fill = "fillfunctor" in low
    is_copy = "copy_kernel" in low or "copy_device_to_device" in low
    if is_fill:
        tensors = 1
    flops = 0 if (is_fill or is_copy) else numel
    bpe = bytes_per_element(dtype)
    nbytes = numel * bpe * tensors if bpe else None
    return OpCost(flops, nbytes, dtype, "simt" if flops else None)


def _launch_x(dims: object) -> int | None:
    if not isinstance(dims, (list, tuple)) or not dims:
        return None
    x = dims[0]
    if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
        return None
    return x


def _launch_product(dims: object) -> int | None:
    if not isinstance(dims, (list, tuple)) or _launch_x(dims) is None:
        return None
    total = 1
    for v in dims:
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            return None
        total *= v
    return total


def memcpy_cost(name: str, nbytes: int | None) -> OpCost:
    """Cost of a ``gpu_memcpy`` event from its ``bytes`` arg: a host copy moves the bytes over
    the link once; a device-to-device copy reads and writes them (twice the traffic)."""
    if nbytes is None or isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        return UNKNOWN_COST
    if is_host_copy(name):
        return OpCost(0, nbytes, None, "link")
    return OpCost(0, 2 * nbytes, None, None)
