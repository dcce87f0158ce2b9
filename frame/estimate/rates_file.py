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
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from frame.estimate.machine import Throughput
from frame.estimate.signature import Signature
from frame.statefile import read_json, write_json

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
        plain["signature_macs"] = {_signature(s): float(rate) for s, rate in plain["signature_macs"]}
        plain["op_costs"] = {op: (float(per_mac), float(per_weight)) for op, (per_mac, per_weight)
                             in plain.get("op_costs", {}).items()}
        rates = Throughput(**plain)
    except (KeyError, TypeError, ValueError):
        return None
    return rates if set(required) <= set(rates.signature_macs) else None
