"""OnnxStream's tensor-name escaping: every character outside ``[A-Za-z0-9]`` becomes ``_<HEX>_``.

OnnxStream's converter writes each ONNX tensor name this way (``.`` → ``_2E_``, ``/`` → ``_2F_``,
``_`` → ``_5F_``) and uses the escaped name, plus ``.bin``, as the weight's file name. The escaping is
reversible because a literal ``_`` is itself escaped: in a well-formed name every ``_`` opens an
escape. ``unescape`` gives back the ONNX names (``sample``, ``encoder_hidden_states``, ``input.1``)
so graph inputs and outputs carry the names diffusers exports use; a name that is not a valid
escape (hand-made folders, other converters) is kept as it is.
"""

from __future__ import annotations

import re
import string

_PLAIN = frozenset(string.ascii_letters + string.digits)
_ESCAPE = re.compile(r"_([0-9A-F]{1,6})_")


def escape(name: str) -> str:
    """``name`` as OnnxStream writes it into model.txt and file names."""
    return "".join(c if c in _PLAIN else f"_{ord(c):X}_" for c in name)


def unescape(name: str) -> str:
    """The original name of an escaped one; ``name`` unchanged when it is not a valid escape."""
    out: list[str] = []
    at = 0
    while at < len(name):
        if name[at] != "_":
            out.append(name[at])
            at += 1
            continue
        match = _ESCAPE.match(name, at)
        if match is None:
            return name
        code = int(match.group(1), 16)
        if code > 0x10FFFF or (code < 0x80 and (chr(code) in _PLAIN or not chr(code).isprintable())):
            return name  # an escape the converter never writes: not an escaped name
        out.append(chr(code))
        at = match.end()
    return "".join(out)
