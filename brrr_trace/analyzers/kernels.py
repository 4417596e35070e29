"""What a GPU kernel is, read from its name: its family, TF32 or not, its data type, host copies.

A kernel's name is often all a trace says about it (shapes not recorded, no launching op, kernels
fused by Inductor), and the family still separates matrix work from memory-bound work. The
taxonomy follows reference ``rules-and-roofline.md`` §6. Only the name and its template
arguments are read: a demangled parameter list repeats the types of every argument, which say
nothing about what the kernel does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from brrr_trace.arraysets import distinct
from brrr_trace.vocabulary import KernelKind


class _Words:
    """A pattern of lowercase words, matched case-insensitively and compiled on first use.
    ASCII text (nearly every kernel name) is lowered and searched case-sensitively: the same
    matches, ~4x faster than ``re.IGNORECASE`` on long templated names (33 -> 8 ms for the
    family rules over the 69 kernel names of gpt_small). Other text keeps IGNORECASE, whose
    Unicode case folding ``str.lower`` does not reproduce.

    ``found`` answers whether ``search`` matches with the pattern's plain-word alternatives
    (``nccl``, ``cublaslt::epilogue``) looked for by ``in`` and only the others by the regex:
    a regex tries each alternative at every position of a ~230-character name, and compiling
    the long alternations was a good part of a first run's classification."""

    __slots__ = ("_any", "_ascii", "_pattern", "_rest", "_rest_rx", "_words")

    def __init__(self, pattern: str) -> None:
        self._pattern = pattern
        self._ascii: re.Pattern[str] | None = None
        self._any: re.Pattern[str] | None = None
        self._words, self._rest = _plain_alternatives(pattern)
        self._rest_rx: re.Pattern[str] | None = None

    def search(self, text: str) -> re.Match[str] | None:
        if text.isascii():
            if self._ascii is None:
                self._ascii = re.compile(self._pattern)
            return self._ascii.search(text.lower())
        if self._any is None:
            self._any = re.compile(self._pattern, re.IGNORECASE)
        return self._any.search(text)

    def found(self, text: str) -> bool:
        if not text.isascii():
            return self.search(text) is not None
        low = text.lower()
        for word in self._words:
            if word in low:
                return True
        if self._rest is None:
            return False
        if self._rest_rx is None:
            self._rest_rx = re.compile(self._rest)
        return self._rest_rx.search(low) is not None


_PLAIN_WORD = re.compile(r"[a-z0-9_:]+")


def _plain_alternatives(pattern: str) -> tuple[tuple[str, ...], str | None]:
    """The top-level alternatives of a pattern that are plain text, and the others joined again
    (None when there are none). A search for ``a|b`` matches where one for ``a`` or for ``b``
    does, so the two halves together match where the whole does."""
    alternatives: list[str] = []
    depth, start, escaped, in_class = 0, 0, False, False
    for i, ch in enumerate(pattern):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            alternatives.append(pattern[start:i])
            start = i + 1
    alternatives.append(pattern[start:])
    words = tuple(a for a in alternatives if _PLAIN_WORD.fullmatch(a))
    rest = [a for a in alternatives if not _PLAIN_WORD.fullmatch(a)]
    return words, "|".join(rest) if rest else None


def _rx(pattern: str) -> _Words:
    # Lowered text matches a pattern case-insensitively only if its letters are lowercase.
    if pattern != pattern.lower():
        raise ValueError(f"kernel-name patterns are written in lowercase: {pattern!r}")
    return _Words(pattern)


# Ordered: the first family that matches wins. Specific op families (attention, norms, softmax)
# come before the generic ones, as in TraceLens's priorities (reference §6), and convolutions
# come before GEMMs because implicit-GEMM convolutions have "gemm" in their names.
_KIND_RULES: tuple[tuple[KernelKind, _Words], ...] = (
    (KernelKind.MEMCPY, _rx(r"^\s*(hip)?memcpy|^dma|memory_copy|__amd_rocclr_copybuffer")),
    (KernelKind.MEMSET, _rx(r"^\s*(hip)?memset|memory_fill|__amd_rocclr_fillbuffer")),
    (
        KernelKind.COMMUNICATION,
        _rx(
            r"nccl|rccl|msccl|cross_device_reduce|multimem_all_reduce"
            r"|(?<![a-z])(all_?reduce|all_?gather|reduce_?scatter|all_?to_?all)"
        ),
    ),
)

# Inductor names kernels triton_<category>_fused_<aten ops>_<n>; the category says what the kernel
# is, the op list only what was fused into it (a pointwise prologue of SDPA contains
# "attention" but is not attention).
_TRITON = _rx(r"^\s*(?:void\s+)?triton_(poi|red|per|tem|for|spl)_")
_TRITON_TEMPLATE_ATTENTION = _rx(r"attention|attn")
_CONV = _rx(r"conv")
_SOFTMAX = _rx(r"softmax")
_TRITON_NORM = _rx(r"layer_norm|group_norm|batch_norm|rms_norm")

_NAME_RULES: tuple[tuple[KernelKind, _Words], ...] = (
    (KernelKind.ELEMENTWISE, _rx(r"kv_?indices|reshape_and_cache|store_kv_?cache")),
    (
        KernelKind.ATTENTION,
        _rx(
            r"flash_?attn|flash_fwd|flash_bwd|flash::|fmha|attention|attn_fwd|attn_bwd|_attn_"
            r"|sdpa|mha_(fwd|bwd)|paged_?attention|flashinfer|xformers"
        ),
    ),
    (KernelKind.ELEMENTWISE, _rx(r"nchwtonhwc|nhwctonchw|batched_transpose")),
    (
        KernelKind.CONV,
        _rx(
            r"fprop|dgrad|wgrad|conv(?!ert)|winograd|scudnn|cudnn::cnn|igemm_(fwd|bwd|wrw)"
            r"|_gtc|im2col|col2im|depthwise|cask_cudnn|xdlops_bwd_weight"
        ),
    ),
    (
        KernelKind.NORM,
        _rx(
            r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|bn_fw|bn_bw"
            r"|rowwisemoments|gammabetabackward|computefusedparams|norm_bw|norm_fw"
        ),
    ),
    (KernelKind.SOFTMAX, _rx(r"softmax")),
    (KernelKind.REDUCTION, _rx(r"splitkreduce|reduce_kernel|reduce_wgrad|compute_dot_do_o")),
    (KernelKind.ELEMENTWISE, _rx(r"cublaslt::epilogue|epilogue::impl")),
    (
        KernelKind.GEMM,
        _rx(
            r"(?<!fb)gemm|gemv|cijk_|nvjet|cublas|cutlass3x|cutlass_\d|xmma|wmma|(?<![a-z])tensorop"
            r"|s1688|h1688|h884|s884"
            r"|16816|i8816|wvsplitk|(^|[^a-z])bmm_|matmul|dot_kernel"
        ),
    ),
    (
        KernelKind.ELEMENTWISE,
        _rx(
            r"elementwise|multi_tensor_apply|foreach|fused_?adam|adam|sgd|lamb_|fill|copy"
            r"|catarray|index_?select|gather|scatter|index_put|index_add|embedding|embs_"
            r"|masked|where|clamp|dropout|distribution|philox|transpose|permute|rotary|rope"
            r"|act_and_mul|silu|gelu|relu|sigmoid|tanh|quant|fp8|float8|upsample|interp"
            r"|tril|triu|arange|one_hot|pad_|flip|roll|_cast|index|indices|scalepackedtensor"
            r"|addtensor|subtensorop|scal_kernel|convert_dq|grad_weight|partial_segment"
            r"|partials_per_segment"
        ),
    ),
    (
        KernelKind.REDUCTION,
        _rx(
            r"reduce|reduction|scan|cumsum|cumprod|argmax|argmin|topk|welford|logsumexp"
            r"|pool|sum_|mean_|norm_kernel|_norm_|nllcriterion|nll_loss|cross_entropy"
        ),
    ),
)


def communication_names(strings: Sequence[str], names: np.ndarray) -> np.ndarray:
    """Per string id: whether it names a collective kernel, decided for the ids in ``names``
    only (GPU op names: the regexes cost ~0.1 ms on a long templated name, and a trace's
    strings are mostly Python frames and ATen ops)."""
    found = np.zeros(len(strings), dtype=bool)
    for sid in distinct(names).tolist():
        found[sid] = kernel_kind(strings[sid]) is KernelKind.COMMUNICATION
    return found


@lru_cache(maxsize=65536)  # a trace repeats a few thousand kernel names
def kernel_kind(name: str) -> KernelKind:
    """What a GPU activity does, from its (demangled or mangled) name alone.

    Needed when shapes were not recorded: the family still separates matrix work from
    memory-bound work. Only the name and its template arguments are read: a demangled
    parameter list names the types of every argument (``fbgemm_gpu::FixedDivisor``,
    ``flashinfer::QuantizationSFLayout``), not what the kernel does. Unknown names are OTHER.
    """
    if not isinstance(name, str) or not name:
        return KernelKind.OTHER
    name = _strip_params(name)
    for kind, rx in _KIND_RULES:
        if rx.found(name):
            return kind
    m = _TRITON.search(name)
    if m:
        category = m.group(1).lower()
        if category == "tem":
            if _TRITON_TEMPLATE_ATTENTION.found(name):
                return KernelKind.ATTENTION
            return KernelKind.CONV if _CONV.found(name) else KernelKind.GEMM
        if category in ("poi", "for"):
            return KernelKind.ELEMENTWISE
        if _SOFTMAX.found(name):
            return KernelKind.SOFTMAX
        if _TRITON_NORM.found(name):
            return KernelKind.NORM
        return KernelKind.REDUCTION
    for kind, rx in _NAME_RULES:
        if rx.found(name):
            return kind
    return KernelKind.OTHER


_TF32_SIMT_OR_HALF = _rx(r"bf16|(?<![a-z0-9])f16|fp16|half|h1688|h884|h16816")


@lru_cache(maxsize=65536)  # a trace repeats a few thousand kernel names
def is_tf32_kernel(name: str) -> bool:
    """Whether an FP32 GEMM/conv kernel runs on tensor cores in TF32 (reference §6).

    An fp32 matmul is bound by the TF32 peak only when cuBLAS/cuDNN picked a TF32 tensor-op
    kernel; the SIMT ``*sgemm*`` kernels are bound by the FP32 CUDA-core peak.
    """
    if not isinstance(name, str):
        return False
    low = name.lower()
    if "tf32" in low or "xf32" in low:
        return True
    # sm80 CUTLASS/cuBLAS kernels spell TF32 MMA as s1688 (16x8x8 with fp32 data).
    tf32_mma = re.search(r"s1688(gemm|fprop|dgrad|wgrad)", low) is not None
    return tf32_mma and not _TF32_SIMT_OR_HALF.found(low)


_DTYPE_LOW_PRECISION: tuple[tuple[str, _Words], ...] = (
    ("fp8", _rx(r"float8|e4m3|e5m2|(?<![a-z0-9])fp8")),
    ("bf16", _rx(r"bfloat16|(?<![a-z0-9])bf16")),
    (
        "fp16",
        _rx(r"c10::half|__half|(?<![a-z0-9])(f16|fp16|half|hgemm|h884|h1688|h16816)(?![0-9])"),
    ),
)
_DTYPE_INT64 = _rx(r"(?<![a-z0-9])(long|int64_t)(?![a-z0-9])")
_HOST_COPY = _rx(r"htod|dtoh|htoh|pageable|pinned|host")
_DTYPE_WIDE = _rx(r"(?<![a-z0-9])(double|f64|fp64|dgemm|float|f32|fp32|sgemm|tf32)(?![0-9])")


def _strip_params(name: str) -> str:
    """Drop a demangled name's trailing parameter list, which repeats types of every argument."""
    s = name.rstrip()
    if not s.endswith(")"):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        ch = s[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                return s[:i]
    return s


@lru_cache(maxsize=65536)  # a trace repeats a few thousand kernel names
def kernel_dtype(name: str) -> str | None:
    """The data type a kernel computes in, read from its name (template args, cuBLAS codes).

    Low precisions win over wide ones because mixed kernels name their accumulator too
    (``ReduceOp<float, MeanOps<c10::BFloat16, …>>`` reads bf16); among fp32/fp64 the first
    mention wins (``MulScalarFunctor<float, double>`` computes in float).
    """
    if not isinstance(name, str) or not name:
        return None
    head = _strip_params(name)
    for dtype, rx in _DTYPE_LOW_PRECISION:
        if rx.found(head):
            return dtype
    m = _DTYPE_WIDE.search(head)
    if m:
        word = m.group(1).lower()
        return "fp64" if word in ("double", "f64", "fp64", "dgemm") else "fp32"
    if _DTYPE_INT64.found(head):
        return "int64"
    return None


@lru_cache(maxsize=65536)  # a trace repeats a few thousand kernel names
def is_host_copy(name: str) -> bool:
    """Whether a memcpy crosses the host link (HtoD, DtoH, pageable/pinned host memory)."""
    if not isinstance(name, str):
        return False
    return _HOST_COPY.found(name)


def template_args(name: str, start: int) -> list[str] | None:
    """Top-level template arguments of the template whose '<' is at ``start``."""
    depth = 0
    args: list[str] = []
    begin = start + 1
    for k in range(start + 1, len(name)):
        ch = name[k]
        if ch in "<({[":
            depth += 1
        elif ch in ">)}]":
            if depth == 0:
                if ch != ">":
                    return None
                args.append(name[begin:k].strip())
                return args
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(name[begin:k].strip())
            begin = k + 1
    return None
