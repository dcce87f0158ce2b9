"""The daemon's live status: what is shown, the render in progress (stage, step, ETA), the fallback
notice (one owner-facing sentence, ``frame.daemon.notices``) and its raw ``notice_details``, next
scheduled runs. Shared by the supervisor, scheduler and HTTP threads; listeners (the
systemd STATUS line) are told about every change.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any


class LiveStatus:
    """Thread-safe dictionary-like status with change listeners."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str], None]] = []
        self._data: dict[str, Any] = {
            "state": "idle", "shown": None, "render": None, "notice": None, "notice_details": None,
            "next_runs": {},
            "quiet": False, "started_at": time.time(),
        }

    def add_listener(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            data = copy.deepcopy(self._data)
        if data.get("render"):
            data["render"].pop("_base", None)
        return data

    def update(self, **fields: Any) -> None:
        with self._lock:
            self._data.update(fields)
            line = self._line()
        for listener in self._listeners:
            listener(line)

    def render_started(self, render_id: int, kind: str) -> None:
        self.update(state="rendering", render={
            "id": render_id, "kind": kind, "stage": "starting", "step": 0, "steps": None,
            "started_at": time.time(), "eta_seconds": None, "restarts": 0})

    def render_progress(self, **fields: Any) -> None:
        """Merge worker progress (stage, step, steps, eta_seconds, fraction, preview)."""
        with self._lock:
            render = self._data.get("render")
            if render is None:
                return
            if fields.get("steps") == 0:  # the VAE reports no steps: keep the denoising's count, so the
                fields = {k: v for k, v in fields.items() if k not in ("step", "steps", "fraction")}  # bar stays full
            render.update(fields)
            if "restarts" in fields:
                render.pop("_base", None)  # a restarted worker resumes mid-way: measure afresh
            step, steps = render.get("step") or 0, render.get("steps")
            if "step" in fields and "_base" not in render:
                render["_base"] = (step, time.time())  # steps may start mid-way after a resume
            # the pipeline's own ETA wins (it knows the work inside a step); else time per step
            if "eta_seconds" not in fields and steps and "_base" in render and step > render["_base"][0]:
                done = step - render["_base"][0]
                elapsed = time.time() - render["_base"][1]
                render["eta_seconds"] = round(elapsed / done * (steps - step), 1)
            line = self._line()
        for listener in self._listeners:
            listener(line)

    def render_finished(self) -> None:
        self.update(state="idle", render=None)

    def _line(self) -> str:
        """One short line for systemd's STATUS= (shown by ``systemctl status frame``)."""
        data = self._data
        render = data.get("render")
        if render:
            stage = render.get("stage", "")
            if render.get("steps"):
                eta = render.get("eta_seconds")
                eta_text = f", ETA {eta:.0f} s" if eta is not None else ""
                return f"rendering: {stage} step {render.get('step', 0)}/{render['steps']}{eta_text}"
            return f"rendering: {stage}"
        shown = data.get("shown")
        text = f"showing picture {shown['picture_id']}" if shown else "nothing shown yet"
        if data.get("notice"):
            text += f" ({data['notice']})"
        return text
