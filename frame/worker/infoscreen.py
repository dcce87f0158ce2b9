"""The info screen's worker half: ``python -m frame.worker.infoscreen JOB_DIR``.

The daemon (``frame.daemon.jobs.info``) writes a show job whose ``image`` is ``JOB_DIR/info.png``
plus the facts to draw; this worker draws ``info.png`` at the panel's size (:func:`render_info`,
Pillow's built-in font, no font files) and then runs as the ordinary show worker
(``frame.worker.show``), so dithering, the refresh guard and the drivers are exactly those a picture
goes through.
"""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from frame.atomicfile import write_bytes_atomic
from frame.config import load_config
from frame.config.schema import DisplayConfig
from frame.display import get_panel, open_display
from frame.display.device import DisplaySettings
from frame.errors import UsageError
from frame.worker import process
from frame.worker.events import ErrorEvent
from frame.worker.records import EXIT_PERMANENT, InfoFacts, JobUnreadable, ShowJob, read_job
from frame.worker.show import run_show

log = logging.getLogger(__name__)

INFO_FILE = "info.png"


def canvas_size(display: DisplayConfig, state_dir: Path) -> tuple[int, int]:
    """The size to draw at: the panel's, turned upright for ``display.rotate`` (no cropping by fit)."""

    try:
        width, height = get_panel(display.panel, display.size, display.palette).size
    except UsageError:  # an auto-detected panel: only the HAT's EEPROM knows its size
        with open_display(DisplaySettings.from_section(display), state_dir=state_dir) as opened:
            width, height = opened.panel.size
    return (height, width) if display.rotate in (90, 270) else (width, height)


INK = (0, 0, 0)
PAPER = (255, 255, 255)
ACCENT = (0, 0, 200)  # a clean ink colour on 6- and 7-colour panels; only for the rule, never for text
ELLIPSIS = "..."


def _font(size: int) -> Any:
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


def render_info(facts: InfoFacts, size: tuple[int, int]) -> Any:
    """The info screen as an RGB image of ``size``: the picture beside (landscape) or above (portrait)
    the text, and the phone page's address along the bottom, where nothing can push it off."""

    width, height = size
    body = _font(max(10, round(min(width, height) / 24)))
    title = _font(max(12, round(body.size * 1.4)))
    margin = max(4, min(width, height) // 30)
    canvas = Image.new("RGB", size, PAPER)
    draw = ImageDraw.Draw(canvas)

    footer = [("Phone page:", body), (facts.url, title),
              (facts.hint, body)]
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
    thumb = _thumbnail(facts.image, box) if min(box) > 0 else None
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


def _write_text(column: _Column, facts: InfoFacts, title: Any, body: Any) -> None:
    column.text(facts.title, title)
    why = f"Why this picture: {facts.why}" if facts.why else ""
    details = [f"{label}: {value}" for label, value in facts.details if value]
    # the prompt may take what the details and the explanation leave over, at least two lines
    reserved = len(details) + (min(3, len(wrap(why, body, column.width, 3))) if why else 0)
    column.text(facts.prompt, body, max_lines=max(2, column.lines_left(body) - reserved - 1))
    for line in details:
        column.text(line, body, gap=0)
    column.y += int(_line_height(body) * 0.35)
    column.text(why, body, max_lines=3)


def draw_job(job_dir: Path) -> int:
    """Draw ``JOB_DIR/info.png`` from the job's facts unless it exists; 0, or the worker's exit code."""

    try:
        job = read_job(job_dir)
    except JobUnreadable:
        job = None  # the show worker reports it
    target = job_dir / INFO_FILE
    if not isinstance(job, ShowJob) or job.info is None or target.exists():
        return 0
    try:
        config = load_config(job_dir / "config.yaml", environ={})
        image = render_info(job.info, canvas_size(config.display, job.state_dir))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        write_bytes_atomic(target, buffer.getvalue())
    except Exception as exc:  # a bad picture file or font problem: restarting cannot help
        log.exception("drawing the info screen failed")
        process.emit(ErrorEvent("info screen", f"{type(exc).__name__}: {exc}"))
        return EXIT_PERMANENT
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m frame.worker.infoscreen JOB_DIR``: draw the info screen, then show it as a worker."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1:
        process.configure_logging()
        code = draw_job(Path(argv[0]))
        if code:
            return code
    return process.main(argv, "show", run_show)


if __name__ == "__main__":  # run the importable module, so its logger is frame.worker.infoscreen
    from frame.worker import infoscreen

    sys.exit(infoscreen.main())
