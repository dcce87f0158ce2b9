"""The info screen: what is on the panel, why it was chosen, and where the phone page is.

Holding a frame button puts this on the panel: the current picture small, its prompt, theme and
style, rating and date, the one-sentence "why this picture" from the store, and the phone page's
address, so an owner standing at the wall can find the page without looking anything up.

Two halves, because the daemon never imports Pillow:

* daemon side (standard library only): :func:`page_url`, :func:`info_facts` and :func:`show_info`,
  which writes a show job whose ``image`` is ``JOB_DIR/info.png`` plus the facts to draw;
* worker side (``frame.worker.infoscreen``): ``python -m frame.worker.infoscreen JOB_DIR`` draws
  ``info.png`` at the panel's size and then runs as the ordinary show worker, so dithering, the
  refresh guard and the drivers are exactly those a picture goes through.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import socket
import time
from collections.abc import Callable, Mapping
from datetime import datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

from frame.atomicfile import make_dirs
from frame.daemon.jobs.night import worker_output, write_job_files
from frame.daemon.jobs.supervisor import worker_command
from frame.daemon.store import gallery
from frame.daemon.store.database import Store
from frame.daemon.store.records import StoredPicture
from frame.worker.events import ShowOutput
from frame.worker.records import InfoFacts, ShowJob

if TYPE_CHECKING:
    from frame.daemon.jobs.night import RenderContext

log = logging.getLogger(__name__)

INFO_REASON = "info screen"
INFO_FILE = "info.png"
WILDCARD_HOSTS = ("", "0.0.0.0", "::")
# Connecting a UDP socket sends nothing: the kernel only picks the route and so the source address.
_ROUTE_PROBE = ("10.254.254.254", 9)


# daemon side ----------------------------------------------------------------------------------------

def lan_address() -> str | None:
    """This machine's LAN IPv4 address (the one its default route uses), or None without a network."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(_ROUTE_PROBE)
            address = sock.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith(("0.", "127.")) else address


def page_url(listen: str, port: int | None = None, lan: Callable[[], str | None] = lan_address,
             hostname: Callable[[], str] = socket.gethostname) -> str:
    """The phone page's address for ``web.listen`` (``port``: the port really bound, when known).

    A wildcard bind is reachable on every interface, so the LAN address is shown; without one the
    host name with ``.local`` (Raspberry Pi OS announces it over mDNS/avahi).
    """
    host, _, configured = listen.rpartition(":")
    host = host.strip("[]")
    port = port or int(configured)
    if host in WILDCARD_HOSTS:
        name = hostname()
        host = lan() or (name if "." in name else f"{name}.local")
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/"


def _rating_text(picture: StoredPicture) -> str:
    kind, value = picture.rating_kind, picture.rating_value
    if kind == "thumb":
        text = "liked" if value == 1 else "disliked"
    elif kind == "stars":
        text = f"{value} of 5 stars"
    else:
        return "not rated yet"
    return f"{text} (a favourite)" if picture.favourite else text


def _date_text(created_at: str | None, tz: tzinfo) -> str:
    if not created_at:
        return ""
    when = datetime.fromisoformat(created_at).astimezone(tz)
    return f"{when.day} {when:%b %Y, %H:%M}"


def info_facts(store: Store, state_dir: Path, picture_id: int | None, url: str, tz: tzinfo) -> InfoFacts:
    """What the info screen shows (the worker that draws it reads no database)."""
    picture = store.picture(picture_id) if picture_id is not None else None
    if picture is None:
        return InfoFacts(picture_id=None, image=None, title="No picture on the frame yet", prompt="", details=(),
                         why="", url=url)
    why = picture.why if isinstance(picture.why, Mapping) else {}
    image = gallery.picture_path(state_dir, picture.file)
    details = (("Theme", ", ".join(p for p in (picture.theme, picture.style) if p) or "none"),
               ("Rating", _rating_text(picture)), ("Painted", _date_text(picture.created_at, tz)))
    return InfoFacts(picture_id=picture.id, image=str(image) if image and image.is_file() else None,
                     title=f"Picture {picture.id}", prompt=picture.prompt or "", details=details,
                     why=str(why.get("sentence") or ""), url=url)


def pairing_facts(code: str, minutes: int, url: str) -> InfoFacts:
    """The screen a pairing code is shown on: the code large, what to do with it, and the
    login page's address; the worker draws it as it draws the info screen."""
    return InfoFacts(picture_id=None, image=None, title=f"Pairing code: {code}",
                     prompt=(f"On the phone, open the page below and type this code under \"With a pairing code\" "
                             f"within {minutes} minutes. It works once."),
                     details=(), why="", url=url.rstrip("/") + "/login",
                     hint="Once the phone is paired, the picture comes back.")


def show_info(ctx: RenderContext, facts: InfoFacts) -> ShowOutput:
    """Draw and show the info screen in a worker (``ctx``: the daemon's ``night.RenderContext``).

    Returns the display's answer (``status`` shown / unchanged / too-soon, ``shown`` the virtual
    panel's PNG); raises FrameError when drawing or showing fails.
    """

    folder = Path(ctx.state_dir) / "checkpoints" / f"info-{secrets.token_hex(4)}"
    make_dirs(folder)  # transient (swept at start), but it may be what creates checkpoints/
    write_job_files(folder, ctx.config, ShowJob(state_dir=Path(ctx.state_dir), image=folder / INFO_FILE,
                                                info=facts))
    supervisor = ctx.supervisor_factory(ctx.config.worker.memory_limit_mb, 1,
                                        command=worker_command("infoscreen"))
    started = time.monotonic()
    try:
        outcome = supervisor.run(folder, stop=ctx.stop, deadline=None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result = worker_output(outcome, ShowOutput, "showing the info screen")
    log.info("info screen: %s in %.1f s", result.status, time.monotonic() - started)
    return result
