"""The nights the crash harness records: ``python -m tests.crash.scenario KIND STATE_DIR [OUT_DIR]``.

Run under strace by ``harness.py``. Everything here is the project's real code — the store, the
supervised render worker on the bundled demo model, the gallery, retention, the backup, the restore
at the next start. The only addition is instrumentation: a few store methods write a marker line to
/dev/null after they return (``frame-crash-mark {json}``), so the trace says exactly when a commit,
a deletion or a backup was complete from the caller's side. Markers change nothing on disk.

* ``small`` (the default suite): open the store, a rating, a render with retention and backup, a second
  rating, close; the database is damaged (a bad sector); the next open restores the backup.
* ``full`` (``slow``): the daemon itself (``Daemon.start``) with its HTTP API — a rating and a render
  requested over HTTP, the render worker SIGKILLed mid-render and resumed from its checkpoint, the new
  picture shown on the virtual panel, retention and backup, stop; ``frame render --out`` over an
  existing file; the database damaged; the daemon started again (restore from the backup) and stopped.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from frame.config import Config
from tests.crash.strace import MARK_PREFIX

INITIAL_PICTURES = 3


def scenario_config(state_dir: Path, kind: str, listen: str = "127.0.0.1:9") -> Config:
    """The configuration of a recorded night (the worker re-validates it: a real port, never bound in the
    small night); the start probe uses the same with ``127.0.0.1:0``."""
    from tests.daemon.conftest import clock, make_config

    steps = 2 if kind == "small" else 4
    return make_config(
        state_dir, web={"listen": listen, "token": "test-token-123456"},
        schedule={"timezone": "UTC", "render_at": clock(180), "deadline": clock(240), "show_at": clock(240)},
        model={"source": "demo", "steps": steps, "size": "64x64", "sampler": "euler"},
        display={"panel": "virtual", "size": "96x64"}, gallery={"max_pictures": INITIAL_PICTURES, "max_disk_mb": 100},
        worker={"max_restarts": 3, "memory_limit_mb": 2000})


def _png(colour: tuple[int, int, int]) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def setup(state_dir: Path) -> None:
    """The disk before the recorded night: three pictures (one a favourite) and a backup, all synced."""
    from frame.atomicfile import write_bytes_atomic
    from frame.daemon.store.database import Store
    from frame.daemon.store.gallery import gallery_dir
    from frame.daemon.store.recovery import backup_path

    store = Store.open(state_dir)
    folder = gallery_dir(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(INITIAL_PICTURES):
        render_id = store.start_render("now", None)
        name = f"20260101-00000{number}-r{render_id}"
        write_bytes_atomic(folder / f"{name}.png", _png((40 * number, 90, 160)))
        write_bytes_atomic(folder / f"{name}-panel.png", _png((0, 0, 40 * number)))
        picture = store.add_picture(file=f"{name}.png", panel_file=f"{name}-panel.png", bytes=200,
                                    prompt=f"earlier picture {number}", theme="a lighthouse in a storm",
                                    style="oil painting", origin="theme", seed=number)
        store.finish_render(render_id, "done", picture_id=picture)
    store.rate(2, "stars", 5)  # the favourite retention must keep
    store.backup(backup_path(store.path))
    store.close()
    os.sync()


# markers --------------------------------------------------------------------------------------------

_MARK_FD: int | None = None


def mark(event: str, **fields: Any) -> None:
    global _MARK_FD
    if _MARK_FD is None:
        _MARK_FD = os.open(os.devnull, os.O_WRONLY)
    os.write(_MARK_FD, MARK_PREFIX + json.dumps({"e": event, **fields}).encode())


def _contents(store: Any) -> dict[str, list]:
    return {"pictures": [r[0] for r in store.query("SELECT id FROM pictures ORDER BY id")],
            "ratings": [[r[0], r[1]] for r in store.query("SELECT id, picture_id FROM ratings ORDER BY id")],
            "finished": [r[0] for r in store.query("SELECT id FROM renders WHERE status != 'running'")]}


def install_markers() -> None:
    """Mark each completed commit the history invariants rely on (called in the recorded process)."""
    from frame.daemon.store.database import Store

    originals = {name: getattr(Store, name) for name in ("add_picture", "rate", "delete_picture",
                                                         "finish_render", "backup")}

    def add_picture(self, **fields):
        picture_id = originals["add_picture"](self, **fields)
        mark("picture", id=picture_id)
        return picture_id

    def rate(self, picture_id, kind, value):
        rating_id = originals["rate"](self, picture_id, kind, value)
        mark("rating", id=rating_id, picture=picture_id)
        return rating_id

    def delete_picture(self, picture_id, **options):
        mark("deleting", id=picture_id)
        return originals["delete_picture"](self, picture_id, **options)

    def finish_render(self, render_id, status, **kwargs):
        originals["finish_render"](self, render_id, status, **kwargs)
        mark("render_finished", id=render_id, status=status)

    def backup(self, target):
        with self._lock:
            result = originals["backup"](self, target)
            mark("backup", **_contents(self))
        return result

    for name, function in (("add_picture", add_picture), ("rate", rate), ("delete_picture", delete_picture),
                           ("finish_render", finish_render), ("backup", backup)):
        setattr(Store, name, function)


def damage_database(state_dir: Path) -> None:
    """A bad sector in the store's first page (the header): the next open must notice and restore."""
    mark("damage")
    fd = os.open(state_dir / "frame.db", os.O_WRONLY)
    try:
        os.pwrite(fd, b"bad sector \0" * 40, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


# the nights ----------------------------------------------------------------------------------------

def small(state_dir: Path) -> None:
    from frame.daemon.jobs import night
    from frame.daemon.store.database import Store

    config = scenario_config(state_dir, "small")
    store = Store.open(state_dir)
    store.rate(1, "thumb", -1)
    ctx = night.RenderContext(config, store, state_dir)
    render_id = store.start_render("now", None)
    outcome, picture_id = night.render(ctx, render_id, "now")
    if picture_id is None:
        raise SystemExit(f"the recorded render failed: {outcome}")
    store.rate(picture_id, "thumb", 1)
    store.close()
    damage_database(state_dir)
    Store.open(state_dir).close()
    mark("end")


def full(state_dir: Path, out_dir: Path) -> None:
    import signal

    import requests

    from frame.daemon.service import Daemon
    from tests.ports import free_port

    port = free_port()
    config = scenario_config(state_dir, "full", listen=f"127.0.0.1:{port}")
    url, headers = f"http://127.0.0.1:{port}", {"Authorization": "Bearer test-token-123456"}
    daemon = Daemon(config)
    daemon.start()
    try:
        requests.post(f"{url}/api/pictures/1/rating", json={"rating": -1}, headers=headers, timeout=10)
        render_id = requests.post(f"{url}/api/render", headers=headers, timeout=10).json()["render_id"]
        killed = False
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            render = daemon.store.render(render_id)
            if render.status != "running":
                break
            step = (daemon.live.snapshot().get("render") or {}).get("step")
            supervisor = daemon.ctx.supervisor
            if not killed and step and step >= 2 and supervisor is not None and supervisor.pid:
                os.kill(supervisor.pid, signal.SIGKILL)
                killed = True
            time.sleep(0.05)
        picture_id = daemon.store.render(render_id).picture_id
        if picture_id is None or not killed:
            raise SystemExit(f"the recorded render did not go as planned: {daemon.store.render(render_id)}")
        while daemon.store.last_shown() is None or daemon.store.last_shown().picture_id != picture_id:
            if time.monotonic() > deadline:
                raise SystemExit("the new picture was never shown")
            time.sleep(0.05)
        requests.post(f"{url}/api/pictures/{picture_id}/rating", json={"stars": 4}, headers=headers, timeout=10)
    finally:
        daemon.stop()
    from frame.cli.program import main as frame_main
    from frame.models import demo_model_path

    code = frame_main(["render", "--model", str(demo_model_path()), "--prompt", "a lighthouse", "--steps", "2",
                       "--size", "64x64", "--out", str(out_dir / "owner.png")])
    if code:
        raise SystemExit(f"frame render exited {code}")
    damage_database(state_dir)
    daemon = Daemon(dataclasses.replace(config, web=dataclasses.replace(config.web, listen="127.0.0.1:0")))
    daemon.start()
    daemon.stop()
    mark("end")


def main(argv: list[str]) -> int:
    kind, state_dir = argv[0], Path(argv[1])
    if os.environ.get("CRASH_HARNESS_SYNCHRONOUS"):  # the harness's own test: an unsafe setting is caught
        from frame.daemon.store import database as store

        store.SYNCHRONOUS = os.environ["CRASH_HARNESS_SYNCHRONOUS"]
    install_markers()
    if kind == "small":
        small(state_dir)
    else:
        full(state_dir, Path(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
