"""This machine's last measurement, kept in the state folder so ``frame config check`` need not measure
again (``<state_dir>/machine.json``).

Measuring takes seconds here and far longer on a Pi (the fixed probes plus every component's heaviest
step signatures), and ``config check`` ran it on every call: 13 s on the development machine, run by
the installer too. A measurement is reused while it is younger than ``MAX_AGE_SECONDS`` and covers the
signatures the estimate requires (``machine.component_leaders``: another model or size has others);
else it is measured again and saved. A damaged or unreadable file only means "measure". Only the "this
machine" figures use it: the Pi projection never depends on a measurement (``frame.estimate.pi``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from frame.estimate.machine import Throughput
from frame.estimate.signature import Signature
from frame.statefile import read_json, write_json

log = logging.getLogger(__name__)

FILE = "machine.json"
MAX_AGE_SECONDS = 7 * 24 * 3600
FORMAT = 2  # 2: op_costs (a measurement without them is made again)


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _signature(data: list) -> Signature:
    op, shapes, attrs, storage = data
    return Signature(op, _tuples(shapes), _tuples(attrs), storage)


def _plain(signature: Signature) -> list:
    return [signature.op, signature.shapes, signature.attrs, signature.storage]


def save_rates(folder: Path, rates: Throughput, now: float | None = None) -> None:
    """Keep ``rates`` in ``folder/machine.json`` (nothing when the folder does not exist, a read-only
    command never creates the state folder, or cannot be written by this user)."""
    if not Path(folder).is_dir():
        return
    plain = {f.name: getattr(rates, f.name) for f in dataclasses.fields(rates)}
    plain["signature_macs"] = [[_plain(s), rate] for s, rate in rates.signature_macs.items()]
    try:
        write_json(Path(folder) / FILE, {"format": FORMAT, "made_at": time.time() if now is None else now,
                                         "rates": plain})
    except OSError:  # a state folder this user may not write (the daemon's): measured again next time
        return


def load_rates(folder: Path, required: Collection[Signature], now: float | None = None) -> Throughput | None:
    """The kept measurement when it is recent and covers ``required``, else None."""
    data = read_json(Path(folder) / FILE)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    made = data.get("made_at")
    age = (time.time() if now is None else now) - made if isinstance(made, (int, float)) else None
    if age is None or not 0 <= age < MAX_AGE_SECONDS:
        return None
    try:
        plain = dict(data["rates"])
        plain["signature_macs"] = {_signature(s): _rate(rate) for s, rate in plain["signature_macs"]}
        plain["op_costs"] = {op: (_number(per_mac), _number(per_weight)) for op, (per_mac, per_weight)
                             in plain.get("op_costs", {}).items()}
        _check_fields(plain)
        rates = Throughput(**plain)
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        log.warning("%s is unusable (%s): measuring again", Path(folder) / FILE, str(exc)[:120])
        return None
    return rates if set(required) <= set(rates.signature_macs) else None


def _number(value: Any) -> float:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{str(value)[:40]!r} is not a finite number >= 0")
    return float(value)


def _rate(value: Any) -> float:
    if _number(value) <= 0:
        raise ValueError("a rate of 0")
    return float(value)


_RATES = ("gemm_macs", "stream_bytes")  # divisors: above 0
_NUMBERS = ("step_seconds", "cpu_share", "seconds")
_OPTIONAL = ("read_bytes", "worker_start_seconds", "load_seconds_per_node")  # numbers or None
_MAPS = ("kind_macs", "op_macs", "decode_seconds")  # name -> number


def _check_fields(plain: dict) -> None:
    """Each field of ``Throughput`` a number of the right range (a forged or damaged file must not
    divide the estimate by zero or add a string to it); an unknown field refused."""
    for name, value in plain.items():
        if name in ("signature_macs", "op_costs") or name in _OPTIONAL and value is None:
            continue
        if name == "label":
            if not isinstance(value, str):
                raise ValueError("label is not text")
        elif name in _MAPS:
            if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                raise ValueError(f"{name} is not a table")
            plain[name] = {k: _number(v) for k, v in value.items()}
        elif name in _RATES:
            plain[name] = _rate(value)
        elif name in _NUMBERS or name in _OPTIONAL:
            plain[name] = _number(value)
        else:
            raise ValueError(f"unknown field {name[:40]!r}")
