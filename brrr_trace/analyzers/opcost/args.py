"""An op's recorded inputs decoded: Input Dims, Input type and Concrete Inputs.

The profiler writes shapes, C++ type names and the text of literals; the cost formulas need
shapes, normalised dtypes, bytes per element and values, and must survive any of them missing.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence


def word_set(text: str) -> frozenset[str]:
    """The space-separated names in ``text``: long name lists written as lines of prose."""
    return frozenset(text.split())


# "Input type" strings as the profiler writes them; reference §4.1 plus brrr additions.
_DTYPES: dict[str, tuple[str, int]] = {
    "double": ("fp64", 8),
    "float": ("fp32", 4),
    "c10::half": ("fp16", 2),
    "half": ("fp16", 2),
    "c10::bfloat16": ("bf16", 2),
    "bfloat16": ("bf16", 2),
    "c10::float8_e4m3fn": ("fp8", 1),
    "c10::float8_e4m3fnuz": ("fp8", 1),
    "c10::float8_e5m2": ("fp8", 1),
    "c10::float8_e5m2fnuz": ("fp8", 1),
    "c10::float8_e8m0fnu": ("fp8", 1),
    "c10::float4_e2m1fn_x2": ("fp4", 1),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "short int": ("int16", 2),
    "short": ("int16", 2),
    "unsigned short": ("uint16", 2),
    "int": ("int32", 4),
    "unsigned int": ("uint32", 4),
    "long int": ("int64", 8),
    "long": ("int64", 8),
    "long long": ("int64", 8),
    "unsigned long": ("uint64", 8),
    "c10::complex<c10::half>": ("complex32", 4),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
}

# Argument kinds that are not tensors (case matters: "Double" is a scalar, "double" a tensor).
NON_TENSOR: frozenset[str] = word_set(
    "Scalar ScalarList GenericList TensorList Int Bool Double Float Long String "
    "Device Layout ScalarType MemoryFormat None"
) | {""}

# c10::ScalarType codes, as Concrete Inputs write a dtype argument.
SCALAR_TYPES: dict[int, tuple[str, int]] = {
    0: ("uint8", 1),
    1: ("int8", 1),
    2: ("int16", 2),
    3: ("int32", 4),
    4: ("int64", 8),
    5: ("fp16", 2),
    6: ("fp32", 4),
    7: ("fp64", 8),
    8: ("complex32", 4),
    9: ("complex64", 8),
    10: ("complex128", 16),
    11: ("bool", 1),
    15: ("bf16", 2),
    23: ("fp8", 1),
    24: ("fp8", 1),
    25: ("fp8", 1),
    26: ("fp8", 1),
}
_BPE_OF_DTYPE: dict[str, int] = {d: b for d, b in _DTYPES.values()} | {"tf32": 4}


def dtype_of_type(type_name: object) -> str | None:
    """Normalised dtype of a profiler ``Input type`` string; None for non-tensors or unknowns."""
    if not isinstance(type_name, str) or type_name in NON_TENSOR:
        return None
    hit = _DTYPES.get(type_name.strip().lower())
    return hit[0] if hit else None


def bytes_per_element(dtype: str | None) -> int | None:
    """Storage bytes of one element of a normalised dtype (fp4 packs two per byte: 1)."""
    return _BPE_OF_DTYPE.get(dtype) if dtype else None


def _is_dim_list(value: object) -> bool:
    return isinstance(value, (list, tuple)) and all(
        isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value
    )


class OpArgs:
    """Lenient view of one op's Input Dims / Input type / Concrete Inputs.

    Every accessor returns None for anything missing or malformed, so formulas can be written
    as straight arithmetic guarded by one check instead of a try/except around each index.
    """

    def __init__(
        self, dims: object, types: object, concrete: object, list_dtype: str | None = None
    ) -> None:
        self.dims = list(dims) if isinstance(dims, (list, tuple)) else []
        self.types = list(types) if isinstance(types, (list, tuple)) else []
        self.concrete = list(concrete) if isinstance(concrete, (list, tuple)) else []
        # Traces record TensorLists without an element type; the caller may know it.
        self.assumed_list_dtype = list_dtype

    def __len__(self) -> int:
        return max(len(self.dims), len(self.types))

    def shape(self, i: int) -> tuple[int, ...] | None:
        """Shape of tensor argument i (None if it is not a tensor with a valid shape)."""
        if i >= len(self.dims) or not _is_dim_list(self.dims[i]):
            return None
        kind = self.types[i] if i < len(self.types) else None
        if isinstance(kind, str) and kind in NON_TENSOR:
            return None
        return tuple(self.dims[i])

    def dtype(self, i: int) -> str | None:
        return dtype_of_type(self.types[i]) if i < len(self.types) else None

    def bpe(self, i: int) -> int | None:
        return bytes_per_element(self.dtype(i))

    def tensor(self, i: int) -> tuple[tuple[int, ...], str, int] | None:
        """(shape, dtype, bytes per element) of tensor argument i, or None."""
        shape, dtype = self.shape(i), self.dtype(i)
        if shape is None or dtype is None:
            return None
        return shape, dtype, _BPE_OF_DTYPE[dtype]

    def shape_list(self, i: int) -> list[tuple[int, ...]] | None:
        """Shapes of a TensorList argument (nested dims); None if not a list of shapes."""
        if i >= len(self.dims):
            return None
        v = self.dims[i]
        if not isinstance(v, (list, tuple)) or not v:
            return None
        if not all(_is_dim_list(s) for s in v):
            return None
        return [tuple(s) for s in v]

    def list_dtype(self, i: int) -> tuple[str | None, int | None]:
        """(dtype, bytes per element) of TensorList argument i: its recorded type, else the
        assumed one."""
        dtype = self.dtype(i) or self.assumed_list_dtype
        return dtype, bytes_per_element(dtype)

    def value(self, i: int) -> object:
        """Concrete input i as a value (int, float, bool, list or None); never runs code."""
        if i >= len(self.concrete):
            return None
        return parse_concrete(self.concrete[i])

    def int_list(self, i: int, length: int | None = None) -> list[int] | None:
        v = self.value(i)
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            v = [v]
        if not isinstance(v, list) or not v:
            return None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return None
        if length is not None:
            if len(v) == 1:
                v = v * length
            if len(v) != length:
                return None
        return v

    def int_value(self, i: int) -> int | None:
        v = self.value(i)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    def bool_value(self, i: int) -> bool | None:
        v = self.value(i)
        return v if isinstance(v, bool) else None


_CONCRETE_WORDS = {
    "True": "True",
    "False": "False",
    "None": "None",
    "true": "True",
    "false": "False",
}


def parse_concrete(text: object) -> object:
    """A ``Concrete Inputs`` string as a value: "[16, 16]" → [16, 16], "True" → True, "0." → 0.0.

    Only literals are accepted (``ast.literal_eval``); "" (a tensor) and anything else → None.
    """
    if not isinstance(text, str):
        return None
    s = text.strip()
    if not s or len(s) > 10_000:
        return None
    s = _CONCRETE_WORDS.get(s, s)
    try:
        value = ast.literal_eval(s)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(value, tuple):
        value = list(value)
    return value if isinstance(value, (int, float, bool, list)) or value is None else None


def numel(shape: Sequence[int]) -> int:
    """Element count of a shape (1 for a 0-dim tensor)."""
    return math.prod(shape)
