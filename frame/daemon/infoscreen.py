"""The info screen: what is on the panel, why it was chosen, and where the phone page is.

Holding a frame button puts this on the panel: the current picture small, its prompt, theme and
style, rating and date, the one-sentence "why this picture" from the store, and the phone page's
address, so an owner standing at the wall can find the page without looking anything up.

Two halves, because the daemon never imports Pillow:

* daemon side (standard library only): :func:`page_url`, :func:`info_facts` and :func:`show_info`,
  which writes a show job whose ``image`` is ``JOB_DIR/info.png`` plus the facts to draw;
* worker side: ``python -m frame.daemon.infoscreen JOB_DIR`` draws ``info.png`` at the panel's size
  (:func:`render_info`, Pillow's built-in font, no font files) and then runs as the ordinary show
  worker (``frame.daemon.worker``), so dithering, the refresh guard and the drivers are exactly those
  a picture goes through.
"""

from __future__ import annotations

import io
import logging
import secrets
import shutil
import socket
import sys
import time
from collections.abc import Callable
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from frame.atomicfile import make_dirs, write_bytes_atomic
from frame.daemon import gallery, worker
from frame.daemon.store import Store
from frame.errors import FrameError
from frame.statefile import read_json

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


def _rating_text(picture: dict[str, Any]) -> str:
    kind, value = picture.get("rating_kind"), picture.get("rating_value")
    if kind == "thumb":
        text = "liked" if value == 1 else "disliked"
    elif kind == "stars":
        text = f"{value} of 5 stars"
    else:
        return "not rated yet"
    return f"{text} (a favourite)" if picture.get("favourite") else text


def _date_text(created_at: str | None, tz: tzinfo) -> str:
    if not created_at:
        return ""
    when = datetime.fromisoformat(created_at).astimezone(tz)
    return f"{when.day} {when:%b %Y, %H:%M}"


def info_facts(store: Store, state_dir: Path, picture_id: int | None, url: str, tz: tzinfo) -> dict[str, Any]:
    """What the info screen shows, as plain JSON (the worker that draws it reads no database)."""
    picture = store.picture(picture_id) if picture_id is not None else None
    if picture is None:
        return {"picture_id": None, "image": None, "title": "No picture on the frame yet", "prompt": "",
                "details": [], "why": "", "url": url}
    why = picture.get("why") if isinstance(picture.get("why"), dict) else {}
    image = gallery.picture_path(state_dir, picture.get("file"))
    details = [("Theme", ", ".join(p for p in (picture.get("theme"), picture.get("style")) if p) or "none"),
               ("Rating", _rating_text(picture)), ("Painted", _date_text(picture.get("created_at"), tz))]
    return {"picture_id": picture["id"], "image": str(image) if image and image.is_file() else None,
            "title": f"Picture {picture['id']}", "prompt": picture.get("prompt") or "",
            "details": details, "why": str(why.get("sentence") or ""), "url": url}


def show_info(ctx: Any, facts: dict[str, Any]) -> dict[str, Any]:
    """Draw and show the info screen in a worker (``ctx``: the daemon's ``night.RenderContext``).

    Returns the display's answer (``status`` shown / unchanged / too-soon, ``shown`` the virtual
    panel's PNG); raises FrameError when drawing or showing fails.
    """
    from frame.daemon.night import write_job_files

    folder = Path(ctx.state_dir) / "checkpoints" / f"info-{secrets.token_hex(4)}"
    make_dirs(folder)  # transient (swept at start), but it may be what creates checkpoints/
    write_job_files(folder, ctx.config, {"kind": "show", "state_dir": str(ctx.state_dir),
                                         "image": str(folder / INFO_FILE), "panel": None, "info": facts})
    supervisor = ctx.supervisor_factory(ctx.config.worker.memory_limit_mb, 1,
                                        command=[sys.executable, "-m", "frame.daemon.infoscreen"])
    started = time.monotonic()
    try:
        outcome = supervisor.run(folder, stop=ctx.stop, deadline=None)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if outcome.status != "done":
        raise FrameError(f"showing the info screen failed at step {outcome.step or 'show'!r}: "
                         f"{outcome.error or outcome.status}")
    result = outcome.result or {}
    log.info("info screen: %s in %.1f s", result.get("status"), time.monotonic() - started)
    return result


# worker side ----------------------------------------------------------------------------------------

def canvas_size(display: Any, state_dir: Path) -> tuple[int, int]:
    """The size to draw at: the panel's, turned upright for ``display.rotate`` (no cropping by fit)."""
    from frame.display import get_panel, open_display
    from frame.errors import UsageError

    try:
        width, height = get_panel(display.panel, display.size, display.palette).size
    except UsageError:  # an auto-detected panel: only the HAT's EEPROM knows its size
        with open_display(display, state_dir=state_dir) as opened:
            width, height = opened.panel.size
    return (height, width) if display.rotate in (90, 270) else (width, height)


INK = (0, 0, 0)
PAPER = (255, 255, 255)
ACCENT = (0, 0, 200)  # a clean ink colour on 6- and 7-colour panels; only for the rule, never for text
ELLIPSIS = "..."


def _font(size: int) -> Any:
    from PIL import ImageFont

    return ImageFont.load_default(size=size)  # the font bundled with Pillow (>= 10.1): no files needed


def wrap(text: str, font: Any, width: float, max_lines: int) -> list[str]:
    """``text`` broken into lines no wider than ``width`` pixels, at most ``max_lines`` (the last one
    ends in an ellipsis when text was left out). Words wider than a line are cut."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        candidate = f"{line} {word}" if line else word
        if font.getlength(candidate) <= width:
            line = candidate
            continue
        if line:
            lines.append(line)
        while len(word) > 1 and font.getlength(word) > width:
            cut = 1
            while cut < len(word) and font.getlength(word[:cut + 1]) <= width:
                cut += 1
            lines.append(word[:cut])
            word = word[cut:]
        line = word
    if line:
        lines.append(line)
    if max_lines <= 0:
        return []
    if len(lines) <= max_lines:
        return lines
    kept = lines[:max_lines]
    last = kept[-1]
    while last and font.getlength(last + ELLIPSIS) > width:
        last = last[:-1]
    kept[-1] = last.rstrip() + ELLIPSIS
    return kept


def _thumbnail(path: str | None, box: tuple[int, int]) -> Any:
    """The picture scaled to fit ``box`` (kept whole: the info screen is about this picture)."""
    from PIL import Image

    if not path:
        return None
    with Image.open(path) as opened:
        picture = opened.convert("RGB")
    picture.thumbnail(box, Image.Resampling.LANCZOS)
    return picture


class _Column:
    """Text placed top-down inside one rectangle; stops at ``bottom``."""

    def __init__(self, draw: Any, left: int, top: int, width: int, bottom: int) -> None:
        self.draw, self.left, self.y, self.width, self.bottom = draw, left, top, width, bottom

    def lines_left(self, font: Any) -> int:
        return max(0, (self.bottom - self.y) // _line_height(font))

    def text(self, text: str, font: Any, max_lines: int = 1, gap: float = 0.35) -> None:
        lines = wrap(text, font, self.width, min(max_lines, self.lines_left(font)))
        for line in lines:
            self.draw.text((self.left, self.y), line, font=font, fill=INK)
            self.y += _line_height(font)
        if lines:
            self.y += int(_line_height(font) * gap)


def _line_height(font: Any) -> int:
    return int(font.size * 1.25)


def render_info(facts: dict[str, Any], size: tuple[int, int]) -> Any:
    """The info screen as an RGB image of ``size``: the picture beside (landscape) or above (portrait)
    the text, and the phone page's address along the bottom, where nothing can push it off."""
    from PIL import Image, ImageDraw

    width, height = size
    body = _font(max(10, round(min(width, height) / 24)))
    title = _font(max(12, round(body.size * 1.4)))
    margin = max(4, min(width, height) // 30)
    canvas = Image.new("RGB", size, PAPER)
    draw = ImageDraw.Draw(canvas)

    footer = [("Phone page:", body), (facts.get("url") or "", title),
              ("Hold a button again to return to the picture.", body)]
    footer_height = sum(_line_height(font) for _, font in footer)
    text_bottom = height - margin - footer_height - margin
    draw.rectangle((margin, text_bottom + margin // 2, width - margin, text_bottom + margin // 2 + 2), fill=ACCENT)
    y = height - margin - footer_height
    for text, font in footer:
        draw.text((margin, y), wrap(text, font, width - 2 * margin, 1)[0] if text else "", font=font, fill=INK)
        y += _line_height(font)

    landscape = width >= height
    box = ((width - 3 * margin) * 2 // 5, text_bottom - margin) if landscape else \
        (width - 2 * margin, (text_bottom - margin) * 2 // 5)
    thumb = _thumbnail(facts.get("image"), box) if min(box) > 0 else None
    if thumb is not None:
        draw.rectangle((margin - 1, margin - 1, margin + thumb.width, margin + thumb.height), outline=INK)
        canvas.paste(thumb, (margin, margin))
    if landscape:
        column = _Column(draw, 2 * margin + box[0], margin, width - 3 * margin - box[0], text_bottom)
    else:
        top = 2 * margin + (thumb.height if thumb is not None else 0)
        column = _Column(draw, margin, top, width - 2 * margin, text_bottom)
    _write_text(column, facts, title, body)
    return canvas


def _write_text(column: _Column, facts: dict[str, Any], title: Any, body: Any) -> None:
    column.text(facts.get("title") or "", title)
    why = f"Why this picture: {facts['why']}" if facts.get("why") else ""
    details = [f"{label}: {value}" for label, value in facts.get("details") or [] if value]
    # the prompt may take what the details and the explanation leave over, at least two lines
    reserved = len(details) + (min(3, len(wrap(why, body, column.width, 3))) if why else 0)
    column.text(facts.get("prompt") or "", body, max_lines=max(2, column.lines_left(body) - reserved - 1))
    for line in details:
        column.text(line, body, gap=0)
    column.y += int(_line_height(body) * 0.35)
    column.text(why, body, max_lines=3)


def draw_job(job_dir: Path) -> int:
    """Draw ``JOB_DIR/info.png`` from the job's facts unless it exists; 0, or the worker's exit code."""
    from frame.config import load_config

    job = read_json(job_dir / "job.json")
    target = job_dir / INFO_FILE
    if not isinstance(job, dict) or not isinstance(job.get("info"), dict) or target.exists():
        return 0
    try:
        config = load_config(job_dir / "config.yaml", environ={})
        image = render_info(job["info"], canvas_size(config.display, Path(job["state_dir"])))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        write_bytes_atomic(target, buffer.getvalue())
    except Exception as exc:  # a bad picture file or font problem: restarting cannot help
        log.exception("drawing the info screen failed")
        worker.emit("error", step="info screen", message=f"{type(exc).__name__}: {exc}")
        return worker.EXIT_PERMANENT
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m frame.daemon.infoscreen JOB_DIR``: draw the info screen, then show it as a worker."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1:
        worker.configure_logging()
        code = draw_job(Path(argv[0]))
        if code:
            return code
    return worker.main(argv)


if __name__ == "__main__":
    sys.exit(main())
