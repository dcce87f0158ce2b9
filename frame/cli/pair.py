"""``frame token --pair``: a one-time pairing for a phone, instead of typing the owner token on it.

Prints the link to open (``http://<frame>:8080/pair/<secret>``), the same link as a QR code to scan
with the phone's camera, and the short code to type on the login page instead (``frame.web.pairing``
says how long they live and why guessing is infeasible). The daemon need not be running: the pairing
goes into the state folder, where the daemon looks when the phone comes.

The QR code is drawn by segno (pure Python, no dependencies, one wheel for every platform): a QR
symbol needs Reed-Solomon error correction, eight masks scored by the standard's penalty rules and
BCH-coded format bits, and a mistake in any of them gives a code that phones cannot read, which a
test here could not catch without a decoder. A library that is checked against the standard is worth
its 90 kB; without it (``--no-qr``, or segno not installed) the link and the code are still printed.
"""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from frame.config.schema import Config

log = logging.getLogger(__name__)


def qr_text(link: str) -> str | None:
    """The link as a QR code of Unicode half blocks for a terminal, or None without segno."""
    try:
        import segno
    except ImportError:
        return None
    out = io.StringIO()
    segno.make(link, error="m").terminal(out=out, compact=True)
    return out.getvalue()


def _give_to_the_state_owner(state: Path) -> None:
    """Run as root (sudo), the pairing file would be root's and the daemon's user could not use it up:
    hand it and its lock file to whoever owns the state folder."""
    if os.geteuid() != 0:
        return
    owner = state.stat()
    from frame.web.pairing import LOCK_FILE, PAIRING_FILE

    for name in (PAIRING_FILE, LOCK_FILE):
        path = state / name
        if path.exists():
            os.chown(path, owner.st_uid, owner.st_gid)


def pairing_lines(config: Config, with_qr: bool = True) -> list[str]:
    """Make a pairing in ``config``'s state folder; the lines that tell the owner how to use it."""
    from frame.config import state_dir
    from frame.daemon.http.token import ensure_token
    from frame.daemon.jobs.info import page_url
    from frame.web.pairing import LIFETIME_SECONDS, PairingCodes

    state = state_dir(config)
    ensure_token(config.web.token, state)  # a pairing logs in as the owner: there must be an owner token
    pairing = PairingCodes(state).create("frame token --pair")
    _give_to_the_state_owner(state)
    link = pairing.link(page_url(config.web.listen))
    minutes = LIFETIME_SECONDS // 60
    lines = [f"Open this link on the phone within {minutes} minutes (it works once):", f"  {link}"]
    qr = qr_text(link) if with_qr else None
    if qr:
        lines += ["or scan it with the phone's camera:", qr.rstrip("\n")]
    lines += [f"or type this code on the phone page's login page: {pairing.shown_code()}",
              "(the address is this machine's; if the phone reaches the frame by another name, use the code)"]
    return lines
