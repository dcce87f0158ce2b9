"""The step times this device measured on earlier nights, and what tonight's step choice makes of them.

The estimate projects a denoising step from a few seconds of probes (``frame.estimate.machine``) and is
10-15 % off a real render (docs/estimate.md), so the step choice keeps 15 % of the night free
(``choice.ESTIMATE_MARGIN``). A device that has painted the same model at the same settings before
knows better: the render worker records each night's median step time (``record``) in
``<state_dir>/step_times.json``, keyed by what changes a step's time (``night_key``: the model, the
size, the guidance mode, the weights' precision, attention slicing, the threads, the VAE, the LoRAs).
Tonight's choice (``learned_step``) then uses:

- **no night kept**: the estimate and the 15 % margin, exactly as before;
- **the step time**: the median of the kept nights (the last ``KEEP_NIGHTS``). A measurement slower than
  the estimate is used at once (a wrong slow guess costs steps, a wrong fast one the whole night); a
  faster one is blended in with weight ``nights / TRUSTED_NIGHTS`` until that many nights are kept;
- **the margin**: 15 % until ``STEADY_NIGHTS`` nights are kept; then twice the largest deviation of a
  kept night from their median (as a share of it), never above 15 % nor below ``MARGIN_FLOOR``. The
  night's fixed part (loads, text encoders, decode) is still the estimate's and keeps the 15 %.

The file is hostile like every file frame reads: its size is capped before it is read, every value is
type-checked, and a damaged file is set aside with one warning (``frame.statefile``) and rebuilt from the
next night: it can cost a night its learned figures, never the night.
"""

from __future__ import annotations

import logging
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frame.estimate.choice import ESTIMATE_MARGIN, format_duration
from frame.redact import redact_url
from frame.statefile import read_json, write_json

if TYPE_CHECKING:
    from frame.config.schema import Config

log = logging.getLogger(__name__)

FILE = "step_times.json"
FORMAT = 1
MAX_BYTES = 64 << 10     # a few dozen settings x KEEP_NIGHTS nights: a few KB; bigger is damage
MAX_KEYS = 24            # settings kept; the least recently painted are dropped first
MAX_KEY_CHARS = 400
KEEP_NIGHTS = 7          # the median of the last week's nights
TRUSTED_NIGHTS = 3       # a faster measurement replaces the estimate fully from this many nights
STEADY_NIGHTS = 3        # the margin may shrink from this many nights
MARGIN_FLOOR = 0.05      # never less: a night's measurement does not cover tomorrow's background load
SPREAD_FACTOR = 2.0      # margin = this x the largest relative deviation of a kept night from their median
SLOW_RATIO = 1.25        # measured steps this much slower than the Pi projection are reported
MAX_STEP_SECONDS = 1e6   # a step time above this (11 days) is not a measurement


@dataclass(frozen=True)
class Night:
    """One night's measurement: the median of its steps' seconds, how many steps, when."""

    at: float
    step_seconds: float
    steps: int


@dataclass(frozen=True)
class Learned:
    """Tonight's step time and margin from the kept nights (``nights``: how many; ``measured``: their
    median, None without any)."""

    step_seconds: float
    margin: float
    nights: int
    measured: float | None


def night_key(source: str, size: tuple[int, int], guidance_mode: str, weights: str,
              attention_slices: int | None, loras: int = 0, vae: str = "full", threads: int | None = None) -> str:
    """The settings a step's time depends on, as one readable key (``source`` without credentials)."""
    threads = threads if threads is not None else _threads()
    return (f"{source}|{size[0]}x{size[1]}|guidance={guidance_mode}|weights={weights}|"
            f"slices={attention_slices}|loras={loras}|vae={vae}|threads={threads}")[:MAX_KEY_CHARS]


def config_key(config: Config, size: tuple[int, int], plan: Any) -> str:
    """``night_key`` for a configuration and its night plan (``frame.estimate.plan.NightPlan``): what the
    night's step choice keeps the measurements under and ``frame estimate`` looks them up by."""
    model = config.model
    engine = getattr(config, "engine", None)
    return night_key(redact_url(model.source), size, plan.guidance_mode if plan.guided else "none",
                     str(model.weights), model.attention_slices, loras=len(model.loras),
                     vae=redact_url(str(getattr(model, "vae_decoder", "") or "")) or "full",
                     threads=getattr(engine, "threads", None) or None)


def _threads() -> int:
    """The threads the kernels may use: OpenBLAS's or OpenMP's setting, else the CPU count."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return os.cpu_count() or 1


def _night(value: Any) -> Night | None:
    if not isinstance(value, dict):
        return None
    at, seconds, steps = value.get("at"), value.get("step_seconds"), value.get("steps")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (at, seconds))
    if not numbers or not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        return None
    if not (math.isfinite(at) and math.isfinite(seconds) and 0 < seconds <= MAX_STEP_SECONDS):
        return None
    return Night(float(at), float(seconds), steps)


def load(folder: Path) -> dict[str, list[Night]]:
    """The kept nights by key; empty when there is no file or it is damaged (warned once, rebuilt by
    the next ``record``)."""
    path = Path(folder) / FILE
    data = read_json(path, default=None, max_bytes=MAX_BYTES)
    if data is None:
        return {}
    table = data.get("nights") if isinstance(data, dict) and data.get("format") == FORMAT else None
    if not isinstance(table, dict) or len(table) > MAX_KEYS:
        log.warning("%s: not a step-times file of format %d; its measurements are ignored and it is "
                    "rebuilt from the next night", path, FORMAT)
        return {}
    kept: dict[str, list[Night]] = {}
    for key, nights in table.items():
        parsed = [_night(n) for n in nights] if isinstance(nights, list) and len(nights) <= KEEP_NIGHTS else [None]
        if len(key) > MAX_KEY_CHARS or any(n is None for n in parsed):
            log.warning("%s: the measurements for %.80s are damaged and ignored", path, key)
            continue
        kept[key] = [n for n in parsed if n is not None]
    return kept


def record(folder: Path, key: str, step_seconds: list[float], now: float | None = None) -> Night | None:
    """Keep tonight's measurement (the median of ``step_seconds``) under ``key``; the oldest nights and
    settings beyond the caps are dropped. Nothing without a usable measurement or a writable folder."""
    usable = [s for s in step_seconds if math.isfinite(s) and 0 < s <= MAX_STEP_SECONDS]
    if not usable or not Path(folder).is_dir():
        return None
    night = Night(time.time() if now is None else now, statistics.median(usable), len(usable))
    table = load(folder)
    table[key[:MAX_KEY_CHARS]] = (table.get(key[:MAX_KEY_CHARS], []) + [night])[-KEEP_NIGHTS:]
    newest = sorted(table, key=lambda k: table[k][-1].at)[-MAX_KEYS:]
    plain = {k: [{"at": n.at, "step_seconds": n.step_seconds, "steps": n.steps} for n in table[k]] for k in newest}
    try:
        write_json(Path(folder) / FILE, {"format": FORMAT, "nights": plain})
    except OSError as exc:  # a state folder this user may not write: learned again next time
        log.warning("could not keep tonight's step times in %s: %s", folder, exc)
        return None
    return night


def learned_step(estimate_seconds: float, nights: list[Night]) -> Learned:
    """Tonight's step time and margin from the estimate and the kept nights (the module docstring)."""
    kept = nights[-KEEP_NIGHTS:]
    if not kept:
        return Learned(estimate_seconds, ESTIMATE_MARGIN, 0, None)
    times = [n.step_seconds for n in kept]
    measured = statistics.median(times)
    if measured >= estimate_seconds:
        step = measured
    else:
        weight = min(len(kept), TRUSTED_NIGHTS) / TRUSTED_NIGHTS
        step = (1.0 - weight) * estimate_seconds + weight * measured
    margin = ESTIMATE_MARGIN
    if len(kept) >= STEADY_NIGHTS:
        spread = max(abs(t - measured) for t in times) / measured
        margin = min(ESTIMATE_MARGIN, max(MARGIN_FLOOR, SPREAD_FACTOR * spread))
    return Learned(step, margin, len(kept), measured)


def learned_note(nights: list[Night], estimate_seconds: float, pi_step_seconds: float, label: str) -> list[str]:
    """``frame estimate``'s notes on the kept nights for its settings (none kept: no note)."""
    if not nights:
        return []
    learned = learned_step(estimate_seconds, nights)
    count = f"{learned.nights} earlier night{'s' if learned.nights > 1 else ''}"
    note = (f"this device measured {format_duration(learned.measured or 0.0)} per step on {count} at these "
            f"settings (this machine's projection: {format_duration(estimate_seconds)}); tonight's step choice "
            f"counts {format_duration(learned.step_seconds)} per step with {learned.margin:.0%} to spare "
            f"(docs/estimate.md, \"Step times this device measured\")")
    slow = slow_sentence(learned.measured, pi_step_seconds, label)
    return [note, slow] if slow else [note]


def slow_sentence(measured: float | None, pi_step_seconds: float, label: str, when: str = "on earlier nights") -> str:
    """One plain sentence when the measured steps are ``SLOW_RATIO`` slower than the Pi projection
    (empty otherwise); ``when``: which nights were measured."""
    if measured is None or pi_step_seconds <= 0 or measured <= SLOW_RATIO * pi_step_seconds:
        return ""
    return (f"this device took {format_duration(measured)} per step {when}, "
            f"{measured / pi_step_seconds:.1f} times the {format_duration(pi_step_seconds)} projected for a "
            f"{label}: it runs slower than the estimate's Pi figures")
