"""A pickle reader that executes nothing: the opcodes are interpreted here, not by ``pickle``.

Why not ``pickle.Unpickler`` with a ``find_class`` allow-list: the C unpickler still hashes every dict
key it is handed (a "billion laughs" tuple key, built from a few hundred bytes by memo references,
takes hours to hash and gigabytes to print), recurses in C on deep structures (a SIGSEGV), and its
allocations are the pickle's to choose. Here every value is one of a few plain kinds (None, bool,
int, float, str, bytes, tuple, list, dict), a global is only a ``Global(module, name)`` record that is
never looked up, and a call (``REDUCE``, ``NEWOBJ``) goes to a handler the caller names for that exact
``(module, name)``: the handlers are frame's own functions, so no name in a file reaches a callable.
A call of any other global is refused, or (``inert=True``, for checkpoints that carry a training
tool's bookkeeping beside their weights) becomes an ``Opaque`` value that does nothing.

Limits, checked before the work they bound: the pickle's size (the caller reads at most that much),
the number of values built, the keys per dict and their length, dict keys of plain flat kinds only
(so hashing is linear), and, after the load, the nesting depth (a cycle is refused). Messages quote
values through ``short`` (a bounded repr), so a hostile value costs nothing to name.
"""

from __future__ import annotations

import reprlib
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from frame.engine.errors import FileFormatError

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxtuple, _SHORT.maxlist, _SHORT.maxdict = 2, 4, 4, 4
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 60, 60, 40

_PLAIN_KEYS = (str, int, float, bool, bytes, type(None))
MAX_LONG_BYTES = 64  # LONG1/LONG4: no integer a checkpoint holds is longer


def short(value: Any) -> str:
    """A repr of at most a few hundred characters, whatever ``value`` is (reprlib, shallow)."""
    return _SHORT.repr(value)


@dataclass(frozen=True)
class Global:
    """A ``GLOBAL`` opcode's name, never looked up."""

    module: str
    name: str

    @property
    def dotted(self) -> str:
        return f"{self.module[:80]}.{self.name[:80]}"


@dataclass(frozen=True)
class Opaque:
    """What an unknown call made, in ``inert`` mode: nothing but the name of what was called."""

    dotted: str


@dataclass(frozen=True)
class PickleLimits:
    max_objects: int = 1_000_000  # pushes and MARKs: at most ~80 MiB of values (SDXL's pickle makes ~70,000)
    max_keys: int = 200_000  # in one dict
    max_key_chars: int = 1024
    max_depth: int = 32


_Handler = Callable[..., Any]


class _Mark:
    pass


_MARK = _Mark()


class PickleVM:
    """Interprets one pickle (``load``). ``calls`` maps (module, name) to the function a ``REDUCE`` of
    that global runs; ``persistent`` turns a ``BINPERSID`` id into a value; ``where`` starts every
    message (the file's name)."""

    def __init__(self, data: bytes, where: str, calls: Mapping[tuple[str, str], _Handler],
                 persistent: Callable[[Any], Any] | None = None, limits: PickleLimits = PickleLimits(),
                 inert: bool = False) -> None:
        self.data, self.where, self.calls, self.persistent = data, where, calls, persistent
        self.limits, self.inert = limits, inert
        self.pos = 0
        self.stack: list[Any] = []
        self.marks: list[list[Any]] = []
        self.memo: dict[int, Any] = {}
        self.built = 0

    def fail(self, message: str) -> FileFormatError:
        return FileFormatError(f"{self.where}: {message} (pickle byte {self.pos})", path=self.where, field="pickle")

    # -- reading the byte stream -----------------------------------------------------------------
    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail("the pickle ends inside an opcode")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def _unpack(self, fmt: str) -> int:
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

    def _line(self) -> str:
        end = self.data.find(b"\n", self.pos, self.pos + 512)
        if end < 0:
            raise self.fail("a GLOBAL name is not ended within 512 bytes")
        text = self.data[self.pos:end].decode("utf-8", "replace")
        self.pos = end + 1
        return text

    def _push(self, value: Any) -> None:
        self.built += 1
        if self.built > self.limits.max_objects:
            raise self.fail(f"more than {self.limits.max_objects} values")
        self.stack.append(value)

    def _pop(self) -> Any:
        if not self.stack:
            raise self.fail("an opcode finds the stack empty")
        return self.stack.pop()

    def _pop_mark(self) -> list[Any]:
        if not self.marks:
            raise self.fail("an opcode needs a MARK that is not there")
        items, self.stack = self.stack, self.marks.pop()
        return items

    # -- containers ------------------------------------------------------------------------------
    def _key(self, key: Any) -> Any:
        flat = isinstance(key, _PLAIN_KEYS) or (
            isinstance(key, tuple) and len(key) <= 8 and all(isinstance(k, _PLAIN_KEYS) for k in key))
        if not flat:
            raise self.fail(f"a dict key is a {type(key).__name__} ({short(key)}), not a plain value")
        if isinstance(key, (str, bytes)) and len(key) > self.limits.max_key_chars:
            raise self.fail(f"a dict key is {len(key)} characters long (at most {self.limits.max_key_chars})")
        return key

    def _set_items(self, target: Any, pairs: list[Any]) -> None:
        if not isinstance(target, dict):
            raise self.fail(f"SETITEM on a {type(target).__name__}, not a dict")
        if len(pairs) % 2:
            raise self.fail("SETITEMS with an odd number of values")
        if len(target) + len(pairs) // 2 > self.limits.max_keys:
            raise self.fail(f"a dict holds more than {self.limits.max_keys} keys")
        for at in range(0, len(pairs), 2):
            target[self._key(pairs[at])] = pairs[at + 1]

    def _append(self, target: Any, items: list[Any]) -> None:
        if not isinstance(target, list):
            raise self.fail(f"APPEND to a {type(target).__name__}, not a list")
        target.extend(items)

    def _call(self, func: Any, args: Any) -> Any:
        if not isinstance(func, Global):
            raise self.fail(f"a call of {short(func)}, which is not a global")
        if not isinstance(args, tuple):
            raise self.fail(f"{func.dotted} is called with {type(args).__name__} arguments")
        handler = self.calls.get((func.module, func.name))
        if handler is not None:
            try:
                return handler(*args)
            except TypeError:
                raise self.fail(f"{func.dotted} is called with {len(args)} arguments it does not take") from None
        if self.inert:
            return Opaque(func.dotted)
        raise self.fail(f"the file holds a {func.dotted}, which frame does not read")

    def _build(self, target: Any, state: Any) -> None:
        if not isinstance(target, Opaque) and not getattr(target, "accepts_state", False):
            raise self.fail(f"BUILD on a {type(target).__name__}")

    # -- the loop --------------------------------------------------------------------------------
    def load(self) -> Any:
        """The pickled value; FileFormatError naming the file for anything out of bounds."""
        while True:
            if self.pos >= len(self.data):
                raise self.fail("the pickle ends without STOP")
            op = self.data[self.pos]
            self.pos += 1
            if op == 0x2E:  # STOP
                result = self._pop()
                check_depth(result, self.limits.max_depth, self.fail)
                return result
            handler = _OPS.get(op)
            if handler is None:
                raise self.fail(f"opcode {bytes([op])!r} is not one frame reads")
            handler(self)


def _string(vm: PickleVM, n: int, encoding: str | None) -> None:
    raw = vm._take(n)
    if encoding is None:
        vm._push(bytes(raw))
        return
    try:
        vm._push(raw.decode(encoding))
    except UnicodeDecodeError:
        raise vm.fail("a string is not valid UTF-8") from None


def _long(vm: PickleVM, n: int) -> None:
    if n > MAX_LONG_BYTES:
        raise vm.fail(f"an integer of {n} bytes")
    vm._push(int.from_bytes(vm._take(n), "little", signed=True))


def _get(vm: PickleVM, index: int) -> None:
    if index not in vm.memo:
        raise vm.fail(f"memo {index} is read before it is written")
    vm._push(vm.memo[index])


def _put(vm: PickleVM, index: int) -> None:
    if not vm.stack:
        raise vm.fail("PUT with an empty stack")
    if len(vm.memo) >= vm.limits.max_objects:
        raise vm.fail(f"more than {vm.limits.max_objects} memo entries")
    vm.memo[index] = vm.stack[-1]


def _tuple(vm: PickleVM, n: int) -> None:
    if len(vm.stack) < n:
        raise vm.fail("TUPLE finds too few values")
    items = tuple(vm.stack[len(vm.stack) - n:]) if n else ()
    del vm.stack[len(vm.stack) - n:]
    vm._push(items)


def _mark(vm: PickleVM) -> None:
    vm.built += 1  # a MARK keeps a list: counted like a value (a pickle of MARKs was 56 bytes each)
    if vm.built > vm.limits.max_objects:
        raise vm.fail(f"more than {vm.limits.max_objects} values")
    vm.marks.append(vm.stack)
    vm.stack = []


def _global(vm: PickleVM, module: str, name: str) -> None:
    vm._push(Global(module, name))


def _stack_global(vm: PickleVM) -> None:
    name, module = vm._pop(), vm._pop()
    if not isinstance(module, str) or not isinstance(name, str):
        raise vm.fail("STACK_GLOBAL of values that are not names")
    _global(vm, module, name)


def _persid(vm: PickleVM) -> None:
    if vm.persistent is None:
        raise vm.fail("a persistent id, which this file may not hold")
    vm._push(vm.persistent(vm._pop()))


def _setitem(vm: PickleVM) -> None:
    value, key = vm._pop(), vm._pop()
    vm._set_items(vm.stack[-1] if vm.stack else None, [key, value])


def _setitems(vm: PickleVM) -> None:
    items = vm._pop_mark()
    vm._set_items(vm.stack[-1] if vm.stack else None, items)


def _append(vm: PickleVM) -> None:
    value = vm._pop()
    vm._append(vm.stack[-1] if vm.stack else None, [value])


def _appends(vm: PickleVM) -> None:
    items = vm._pop_mark()
    vm._append(vm.stack[-1] if vm.stack else None, items)


def _dup(vm: PickleVM) -> None:
    vm._push(vm.stack[-1] if vm.stack else vm._pop())


def _dict_from_mark(vm: PickleVM) -> None:
    items = vm._pop_mark()
    made: dict[Any, Any] = {}
    vm._set_items(made, items)
    vm._push(made)


def _reduce(vm: PickleVM) -> None:
    args, func = vm._pop(), vm._pop()
    vm._push(vm._call(func, args))


def _build_op(vm: PickleVM) -> None:
    state = vm._pop()
    vm._build(vm.stack[-1] if vm.stack else None, state)


_OPS: dict[int, Callable[[PickleVM], None]] = {
    0x80: lambda vm: vm._take(1),  # PROTO
    0x95: lambda vm: vm._take(8),  # FRAME (the data is already in memory)
    0x28: _mark,  # MARK
    0x30: lambda vm: vm._pop(),  # POP
    0x31: lambda vm: vm._pop_mark(),  # POP_MARK
    0x32: _dup,  # DUP
    0x4E: lambda vm: vm._push(None),  # NONE
    0x88: lambda vm: vm._push(True),  # NEWTRUE
    0x89: lambda vm: vm._push(False),  # NEWFALSE
    0x4A: lambda vm: vm._push(vm._unpack("<i")),  # BININT
    0x4B: lambda vm: vm._push(vm._unpack("<B")),  # BININT1
    0x4D: lambda vm: vm._push(vm._unpack("<H")),  # BININT2
    0x8A: lambda vm: _long(vm, vm._unpack("<B")),  # LONG1
    0x8B: lambda vm: _long(vm, vm._unpack("<i")),  # LONG4
    0x47: lambda vm: vm._push(vm._unpack(">d")),  # BINFLOAT
    0x58: lambda vm: _string(vm, vm._unpack("<I"), "utf-8"),  # BINUNICODE
    0x8C: lambda vm: _string(vm, vm._unpack("<B"), "utf-8"),  # SHORT_BINUNICODE
    0x8D: lambda vm: _string(vm, vm._unpack("<Q"), "utf-8"),  # BINUNICODE8
    0x54: lambda vm: _string(vm, vm._unpack("<i"), "latin-1"),  # BINSTRING (Python 2 str)
    0x55: lambda vm: _string(vm, vm._unpack("<B"), "latin-1"),  # SHORT_BINSTRING
    0x42: lambda vm: _string(vm, vm._unpack("<I"), None),  # BINBYTES
    0x43: lambda vm: _string(vm, vm._unpack("<B"), None),  # SHORT_BINBYTES
    0x8E: lambda vm: _string(vm, vm._unpack("<Q"), None),  # BINBYTES8
    0x29: lambda vm: vm._push(()),  # EMPTY_TUPLE
    0x74: lambda vm: vm._push(tuple(vm._pop_mark())),  # TUPLE
    0x85: lambda vm: _tuple(vm, 1),  # TUPLE1
    0x86: lambda vm: _tuple(vm, 2),  # TUPLE2
    0x87: lambda vm: _tuple(vm, 3),  # TUPLE3
    0x5D: lambda vm: vm._push([]),  # EMPTY_LIST
    0x6C: lambda vm: vm._push(vm._pop_mark()),  # LIST
    0x61: _append,  # APPEND
    0x65: _appends,  # APPENDS
    0x7D: lambda vm: vm._push({}),  # EMPTY_DICT
    0x64: _dict_from_mark,  # DICT
    0x73: _setitem,  # SETITEM
    0x75: _setitems,  # SETITEMS
    0x71: lambda vm: _put(vm, vm._unpack("<B")),  # BINPUT
    0x72: lambda vm: _put(vm, vm._unpack("<I")),  # LONG_BINPUT
    0x94: lambda vm: _put(vm, len(vm.memo)),  # MEMOIZE
    0x68: lambda vm: _get(vm, vm._unpack("<B")),  # BINGET
    0x6A: lambda vm: _get(vm, vm._unpack("<I")),  # LONG_BINGET
    0x63: lambda vm: _global(vm, vm._line(), vm._line()),  # GLOBAL
    0x93: _stack_global,  # STACK_GLOBAL
    0x51: _persid,  # BINPERSID
    0x52: _reduce,  # REDUCE
    0x81: _reduce,  # NEWOBJ (cls, args): the same allow-list
    0x62: _build_op,  # BUILD
}


def check_depth(root: Any, limit: int, fail: Callable[[str], Exception]) -> None:
    """Refuse a value nested deeper than ``limit`` or holding itself. Shared values (a memo reference
    used many times) are visited once, so a "billion laughs" tree costs its pickle's size, not 2^n."""
    heights: dict[int, int] = {}
    active: set[int] = set()

    def height(value: Any, level: int) -> int:
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, (list, tuple)):
            children = value
        else:
            return 0
        key = id(value)
        if key in heights:
            return heights[key]
        if key in active:
            raise fail("the pickle holds a value that contains itself")
        if level >= limit:
            raise fail(f"values are nested deeper than {limit} levels")
        active.add(key)
        tallest = 0
        for child in children:
            tallest = max(tallest, height(child, level + 1))
        active.discard(key)
        heights[key] = tallest + 1
        return tallest + 1

    height(root, 0)
