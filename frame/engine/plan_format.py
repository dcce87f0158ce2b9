"""A planned model as data only: a JSON tree plus the raw bytes of its arrays (``frame.engine.plan_cache``).

A kept plan used to be a pickle, and a pickle is a program: a forged plan file ran any command.
This encoding cannot name a callable. The tree is JSON; every JSON array in it starts
with a tag saying what it is, and only these tags exist::

    ["L", item...]  list        ["T", item...] tuple     ["S", item...] set    ["F", item...] frozenset
    ["D", key, value, ...] dict                          ["C", key, count, ...] collections.Counter
    ["R", tag, field...]        one of frame's records (``plan_records.RECORDS``), fields in its order
    ["A", dtype, [dims], offset] an array: its bytes at ``offset`` of the array section (C order)
    ["dt", dtype]  a numpy dtype    ["n", dtype, value] a numpy scalar
    ["K", domain, op_type, since]  a registered op's spec    ["k", ...] its kernel (``ops.registry``)
    ["f", name]  a fused kernel (``plan_records.FUSED_KERNELS``)
    ["P", kernel, ["T", ...], ["D", ...]]  functools.partial of a kernel with data arguments
    ["att"]  the model's attention settings (the loader's own object)
    ["@", n]  the n-th list, dict, set, Counter, array, partial or record met so far (shared objects
              stay shared, as the planner made them)

Strings, numbers, booleans and null are themselves. Decoding checks every record field's type, every
array's dtype (``plan_records.DTYPES``), rank and byte range before it allocates, and nesting depth;
anything else raises ``PlanFormatError`` saying what and where.
"""

from __future__ import annotations

import functools
import json
import math
from collections import Counter
from typing import Any

import numpy as np

from frame.engine import ops as _ops  # noqa: F401  (importing the package fills the kernel registry)
from frame.engine.ops.lookup import load_optional
from frame.engine.ops.registry import registered_specs
from frame.engine.plan_records import DTYPES, FUSED_KERNELS, RECORD_TAGS, RECORDS

MAX_DEPTH = 200  # SDXL's deepest path is ~20 (a fused op's partial inside a GEGLU plan); bodies nest more
MAX_NDIM = 32


class PlanFormatError(ValueError):
    """The tree is not a plan this code writes (and is never used)."""


def _kernel_names() -> tuple[dict[int, list], dict[int, list], list]:
    specs, kernels = {}, {}
    alive = registered_specs()
    for spec in alive:
        specs[id(spec)] = ["K", spec.domain, spec.op_type, spec.since]
        kernels[id(spec.fn)] = ["k", spec.domain, spec.op_type, spec.since]
    return specs, kernels, alive


class _Encoder:
    def __init__(self, attention: Any) -> None:
        self.attention = attention
        self.specs, self.kernels, self._alive = _kernel_names()
        self.fused = {id(fn): ["f", name] for name, fn in FUSED_KERNELS.items()}
        self.memo: dict[int, int] = {}
        self.keep: list[Any] = []  # the ids above stay theirs while encoding
        self.arrays: list[bytes] = []
        self.size = 0

    def value(self, obj: Any) -> Any:
        kind = type(obj)
        if obj is None or kind in (str, int, float, bool):
            return obj
        if obj is self.attention:
            return ["att"]
        key = id(obj)
        if key in self.memo:
            return ["@", self.memo[key]]
        if kind is tuple:
            return ["T", *map(self.value, obj)]
        if kind is frozenset:
            return ["F", *map(self.value, obj)]
        if isinstance(obj, np.dtype):
            return ["dt", self._dtype(obj)]
        if isinstance(obj, np.generic):
            return ["n", self._dtype(obj.dtype), obj.item()]
        named = self.specs.get(key) or self.kernels.get(key) or self.fused.get(key)
        if named is not None:
            return named
        self.memo[key] = len(self.memo)
        self.keep.append(obj)
        if kind is list:
            return ["L", *map(self.value, obj)]
        if kind is dict or kind is Counter:
            pairs = (v for k, item in obj.items() for v in (self.value(k), self.value(item)))
            return ["D" if kind is dict else "C", *pairs]
        if kind is set:
            return ["S", *map(self.value, obj)]
        if kind is np.ndarray:
            return self._array(obj)
        if kind is functools.partial:
            if obj.__dict__:
                raise TypeError("a kept plan cannot hold a partial with attributes")
            return ["P", self.value(obj.func), self.value(tuple(obj.args)), self.value(dict(obj.keywords))]
        tag = RECORD_TAGS.get(kind)
        if tag is None:
            raise TypeError(f"a kept plan cannot hold a {kind.__module__}.{kind.__qualname__}")
        fields = RECORDS[tag][1]
        if set(vars(obj)) != {name for name, _ in fields}:
            raise TypeError(f"{tag} has fields {sorted(vars(obj))}; plan_records lists {[n for n, _ in fields]}")
        return ["R", tag, *(self.value(getattr(obj, name)) for name, _ in fields)]

    @staticmethod
    def _dtype(dtype: np.dtype) -> str:
        if dtype.str not in DTYPES:
            raise TypeError(f"a kept plan cannot hold dtype {dtype}")
        return dtype.str

    def _array(self, array: np.ndarray) -> list:
        dtype = self._dtype(array.dtype)
        data = np.ascontiguousarray(array).tobytes()
        offset = self.size
        self.arrays.append(data)
        self.size += len(data)
        return ["A", dtype, list(array.shape), offset]


def encode(planned: Any, attention: Any) -> tuple[bytes, bytes]:
    """(the JSON tree, the array section) of ``planned``; TypeError for anything the format cannot hold."""
    encoder = _Encoder(attention)
    tree = json.dumps(encoder.value(planned), separators=(",", ":"), allow_nan=True).encode()
    return tree, b"".join(encoder.arrays)


_PENDING = object()


class _Decoder:
    def __init__(self, arrays: memoryview, attention: Any) -> None:
        self.arrays = arrays
        self.attention = attention
        self.specs = {(s.domain, s.op_type, s.since): s for s in registered_specs()}
        self.memo: list[Any] = []
        self.records = {tag: (cls, tuple(name for name, _ in fields), fields) for tag, (cls, fields) in RECORDS.items()}
        self.handlers = {"L": self._list, "T": self._tuple, "S": self._set, "F": self._frozenset, "D": self._dict,
                         "C": self._dict, "R": self._record, "A": self._array, "dt": self._dtype_value,
                         "n": self._scalar, "K": self._spec, "k": self._spec, "f": self._fused, "P": self._partial,
                         "att": self._attention, "@": self._ref}

    def value(self, item: Any, depth: int) -> Any:
        """The value ``item`` stands for. An empty array, or one whose tag is unknown or not a string,
        raises IndexError, KeyError or TypeError here or in ``_items`` (``decode`` says which value)."""
        if type(item) is not list:
            return item
        if depth > MAX_DEPTH:
            raise PlanFormatError(f"values nested deeper than {MAX_DEPTH}")
        return self.handlers[item[0]](item, depth + 1)

    def _items(self, item: list, depth: int) -> list:
        if depth > MAX_DEPTH:
            raise PlanFormatError(f"values nested deeper than {MAX_DEPTH}")
        handlers, depth = self.handlers, depth + 1
        return [v if type(v) is not list else handlers[v[0]](v, depth) for v in item[1:]]

    def _list(self, item: list, depth: int) -> list:
        if len(item) == 1:
            out: list = []
            self.memo.append(out)
            return out
        slot = len(self.memo)
        self.memo.append(_PENDING)  # a list never holds itself
        self.memo[slot] = out = self._items(item, depth)
        return out

    def _tuple(self, item: list, depth: int) -> tuple:
        return tuple(self._items(item, depth))

    def _frozenset(self, item: list, depth: int) -> frozenset:
        return frozenset(self._items(item, depth))

    def _set(self, item: list, depth: int) -> set:
        out: set = set()
        self.memo.append(out)
        out.update(self._items(item, depth))
        return out

    def _dict(self, item: list, depth: int) -> dict:
        out: dict = {} if item[0] == "D" else Counter()
        self.memo.append(out)
        values = self._items(item, depth)
        if len(values) % 2:
            raise PlanFormatError("a mapping with a key and no value")
        dict.update(out, zip(values[::2], values[1::2]))  # a Counter's too: keys and counts as written
        return out

    def _record(self, item: list, depth: int) -> Any:
        try:
            cls, names, fields = self.records[item[1]]
        except (IndexError, KeyError, TypeError):
            raise PlanFormatError(f"unknown record {str(item[1:2])[:40]}") from None
        if len(item) != 2 + len(names):
            raise PlanFormatError(f"{item[1]} with {len(item) - 2} fields; it has {len(names)}")
        obj = object.__new__(cls)  # filled below, as the planner left it (no __init__ run)
        self.memo.append(obj)
        values = self._items(item, depth)[1:]
        for (name, allowed), got in zip(fields, values):
            if not (isinstance(got, allowed) if type(allowed) is tuple else allowed.check(got)):
                raise PlanFormatError(f"{item[1]}.{name} is a {type(got).__name__}")
        obj.__dict__.update(zip(names, values))  # a frozen dataclass's too: its fields are plain attributes
        return obj

    def _dtype(self, name: Any) -> np.dtype:
        if type(name) is not str or name not in DTYPES:
            raise PlanFormatError(f"dtype {str(name)[:20]!r} is not allowed")
        return DTYPES[name]

    def _dtype_value(self, item: list, depth: int) -> np.dtype:
        return self._dtype(item[1] if len(item) == 2 else None)

    def _scalar(self, item: list, depth: int) -> np.generic:
        if len(item) != 3 or type(item[2]) not in (int, float, bool):
            raise PlanFormatError("a malformed numpy scalar")
        return self._dtype(item[1]).type(item[2])

    def _array(self, item: list, depth: int) -> np.ndarray:
        if len(item) != 4 or type(item[2]) is not list or type(item[3]) is not int:
            raise PlanFormatError("a malformed array")
        dtype, shape, offset = self._dtype(item[1]), item[2], item[3]
        if len(shape) > MAX_NDIM or any(type(d) is not int or d < 0 for d in shape):
            raise PlanFormatError(f"an array of shape {str(shape)[:60]}")
        count = math.prod(shape)
        if offset < 0 or offset + count * dtype.itemsize > len(self.arrays):
            raise PlanFormatError(f"an array of {count} items outside the file's {len(self.arrays)} array bytes")
        array = np.frombuffer(self.arrays, dtype, count, offset).reshape(shape).copy()  # aligned, writable
        self.memo.append(array)
        return array

    def _spec(self, item: list, depth: int) -> Any:
        key = tuple(item[1:])
        spec = self.specs.get(key) if len(item) == 4 else None
        if spec is None and len(item) == 4 and type(item[1]) is str and type(item[2]) is str:
            load_optional(item[2], item[1])  # a kernel of ``ops.optional`` this process has not needed yet
            self.specs = {(s.domain, s.op_type, s.since): s for s in registered_specs()}
            spec = self.specs.get(key)
        if spec is None:
            raise PlanFormatError(f"no registered kernel {str(item[1:])[:80]}")
        return spec if item[0] == "K" else spec.fn

    def _fused(self, item: list, depth: int) -> Any:
        if len(item) != 2 or type(item[1]) is not str or item[1] not in FUSED_KERNELS:
            raise PlanFormatError(f"no fused kernel {str(item[1:])[:60]}")
        return FUSED_KERNELS[item[1]]

    def _partial(self, item: list, depth: int) -> functools.partial:
        if len(item) != 4 or type(item[1]) is not list or item[1][:1] not in (["k"], ["f"], ["P"], ["@"]):
            raise PlanFormatError("a malformed partial")
        slot = len(self.memo)
        self.memo.append(_PENDING)
        func, args, keywords = (self.value(part, depth) for part in item[1:])
        if not callable(func) or type(args) is not tuple or type(keywords) is not dict \
                or not all(type(k) is str for k in keywords):
            raise PlanFormatError("a malformed partial")
        self.memo[slot] = out = functools.partial(func, *args, **keywords)
        return out

    def _attention(self, item: list, depth: int) -> Any:
        return self.attention

    def _ref(self, item: list, depth: int) -> Any:
        slot = item[1] if len(item) == 2 else None
        if type(slot) is not int or not 0 <= slot < len(self.memo) or self.memo[slot] is _PENDING:
            raise PlanFormatError(f"a reference to {str(slot)[:20]}, which is not defined before it")
        return self.memo[slot]


def _no_objects(pairs: list) -> None:
    raise PlanFormatError("a JSON object is no plan value")


def decode(tree: bytes, arrays: memoryview, attention: Any) -> Any:
    """The value ``tree`` (JSON, see the module docstring) describes, its arrays read from ``arrays``."""
    try:
        raw = json.loads(tree, object_pairs_hook=_no_objects)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, PlanFormatError):
            raise
        raise PlanFormatError(f"the plan is not JSON ({str(exc)[:80]})") from None
    try:
        return _Decoder(arrays, attention).value(raw, 0)
    except (IndexError, KeyError, TypeError) as exc:  # an empty array, an unknown or unhashable tag
        raise PlanFormatError(f"a value of unknown kind ({type(exc).__name__}: {str(exc)[:60]})") from None
