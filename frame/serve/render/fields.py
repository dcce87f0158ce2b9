"""The fields of an AUTOMATIC1111 txt2img/img2img request, each checked against the type A1111's API
gives it, and the largest picture this server may be asked for.

A1111 declares its request with pydantic: ``prompt``/``negative_prompt``/``sampler_name``/
``sampler_index`` are strings, ``steps``/``width``/``height``/``seed``/``batch_size``/``n_iter`` integers,
``cfg_scale`` a number, ``include_init_images`` a boolean. A value of another type used to reach the
pipeline and fail there (a float width was a 500 TypeError, a dict sampler a 500 HTML page); each is
now a ``FieldError`` whose message starts with the field's name (a 422). A whole float (``512.0``) is
the integer A1111 would take; a fractional one, a string or a boolean is not. Fields frame does not
use are ignored, as A1111 ignores the ones it does not know.

Size. A render's memory grows with its pixels: 2048 x 2048 at one step peaked at 8.5 GB (and ran over a
minute), about 2 KiB per pixel, and more than that per pixel above it (attention grows with the square
of the latent's size). ``pixel_limit`` allows what fits in a quarter of the machine's memory at 2 KiB
per pixel — the server is a household computer that keeps doing other work — and never more than
``MAX_PIXELS`` (A1111's own slider limit, 2048 x 2048). The check is made on the size the render will
really have, after the model's defaults fill in a missing width or height.
"""

from __future__ import annotations

import math
import os
from typing import Any

MAX_STEPS = 150                 # AUTOMATIC1111's own slider limit
MAX_PIXELS = 2048 * 2048        # AUTOMATIC1111's own slider limit
BYTES_PER_PIXEL = 2048          # measured: 8.5 GB peak at 2048 x 2048, one step
MEMORY_SHARE = 4                # a render may use a quarter of the machine's memory
MAX_CFG_SCALE = 100.0


class FieldError(ValueError):
    """A field of the wrong type or out of range; the message starts with the field's name."""


def total_memory_bytes() -> int | None:
    """This machine's memory (``MemTotal``), or None where /proc/meminfo cannot tell."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def pixel_limit(memory_bytes: int | None) -> int:
    """The most pixels one render may have on a machine with ``memory_bytes`` (module docstring)."""
    if not memory_bytes:
        return MAX_PIXELS
    return max(64 * 64, min(MAX_PIXELS, memory_bytes // MEMORY_SHARE // BYTES_PER_PIXEL))


def text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise FieldError(f"{key} must be a string, got {_kind(value)}")
    return value


def integer(body: dict[str, Any], key: str, low: int | None = None, high: int | None = None) -> int | None:
    """``body[key]`` as an int (None when absent or null); a whole float counts, nothing else does."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(f"{key} must be an integer, got {_kind(value)}")
    if low is not None and value < low or high is not None and value > high:
        bounds = f"from {low} to {high}" if low is not None and high is not None else \
            f"{low} or more" if low is not None else f"at most {high}"
        raise FieldError(f"{key} must be {bounds}, got {value}")
    return value


def number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FieldError(f"{key} must be a number, got {_kind(value)}")
    if not low <= value <= high:
        raise FieldError(f"{key} must be from {low:g} to {high:g}, got {value:g}")
    return float(value)


def boolean(body: dict[str, Any], key: str) -> bool:
    value = body.get(key)
    if value is not None and not isinstance(value, bool):
        raise FieldError(f"{key} must be true or false, got {_kind(value)}")
    return bool(value)


def check_size(width: int, height: int, limit: int) -> None:
    """Refuse a resolved ``width`` x ``height`` above ``limit`` pixels, saying why there is a limit."""
    if width * height > limit:
        raise FieldError(f"width x height: at most {limit} pixels on this server (what a quarter of its "
                         f"memory holds at ~{BYTES_PER_PIXEL // 1024} KiB per pixel), got {width}x{height}")


def _kind(value: Any) -> str:
    """The JSON type of ``value`` (and the value itself when short), for the error message."""
    names = {bool: "a boolean", str: "a string", list: "a list", dict: "an object", float: "a number",
             int: "an integer"}
    shown = repr(value)
    kind = names.get(type(value), type(value).__name__)
    return f"{kind} {shown}" if len(shown) <= 40 and not isinstance(value, (list, dict)) else kind
