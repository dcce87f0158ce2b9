"""The real worker process (python -m frame.worker.render, .show) under the real supervisor."""

import fcntl
import json
import os
import threading
import time

import pytest
from PIL import Image

from frame.daemon.jobs import night
from frame.daemon.store import gallery
from frame.errors import FrameError
from frame.worker.process import LOCK_NAME, PANEL_LOCK_NAME
from tests.daemon.conftest import make_config


@pytest.fixture
def ctx(tmp_path, store):
    config = make_config(tmp_path, display={"panel": "virtual", "size": "80x48", "min_refresh_seconds": 0},
                         model={"source": str(tmp_path / "no-such-model"), "size": "64x64", "steps": 2})
    return night.RenderContext(config, store, tmp_path)


def _stored_picture(ctx):
    folder = gallery.gallery_dir(ctx.state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (64, 40), (30, 120, 200)).save(folder / "a.png")
    return ctx.store.add_picture(file="a.png", prompt="blue", bytes=1)


def test_show_runs_the_display_in_a_worker(ctx):
    picture_id = _stored_picture(ctx)
    result = night.show_picture(ctx, picture_id, "owner")
    assert result.status == "shown"
    assert Image.open(result.shown).size == (80, 48)
    assert ctx.store.last_shown().picture_id == picture_id
    assert ctx.status.snapshot()["shown"]["picture_id"] == picture_id
    assert night.show_picture(ctx, picture_id, "owner").status == "unchanged"


def test_missing_model_fails_at_the_load_model_step_without_retries(ctx):
    render_id = ctx.store.start_render("now", None)
    outcome, picture_id = night.render(ctx, render_id, "now")
    assert picture_id is None and outcome.status == "failed" and outcome.step == "load model"
    assert outcome.restarts == 0
    assert "load model" in ctx.store.render(render_id).error


def test_run_night_raises_naming_the_step(ctx):
    with pytest.raises(FrameError, match="at step 'load model'"):
        night.run_night(ctx.config)


def test_only_one_render_at_a_time_across_processes(ctx):
    """A worker waits for render.lock held by another process (e.g. an orphan of a killed daemon)."""
    fd = os.open(ctx.state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    stages = []
    released = threading.Lock()

    def release() -> None:  # once: when the worker says it waits (or after 30 s, so a failure cannot hang)
        if released.acquire(blocking=False):
            os.close(fd)

    def listen(line: str) -> None:
        stages.append(line)
        if "waiting for another render" in line:
            release()

    ctx.status.add_listener(listen)
    render_id = ctx.store.start_render("now", None)
    fallback = threading.Timer(30.0, release)
    fallback.start()
    outcome, _ = night.render(ctx, render_id, "now")
    fallback.cancel()
    assert any("waiting for another render" in line for line in stages)
    assert outcome.step == "load model"  # ran after the lock was released


def test_a_show_does_not_wait_for_a_running_render_but_for_another_refresh(ctx):
    """Buttons and scheduled shows stay responsive during the night's render; refreshes never overlap."""
    picture_id = _stored_picture(ctx)
    render_fd = os.open(ctx.state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(render_fd, fcntl.LOCK_EX)  # a render is running
    try:
        assert night.show_picture(ctx, picture_id, "owner").status == "shown"
        panel_fd = os.open(ctx.state_dir / PANEL_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(panel_fd, fcntl.LOCK_EX)  # another refresh is under way
        threading.Timer(1.5, lambda: os.close(panel_fd)).start()
        started = time.monotonic()
        assert night.show_picture(ctx, picture_id, "owner").status == "unchanged"
        assert time.monotonic() - started >= 1.4  # it waited for the other refresh's panel.lock
    finally:
        os.close(render_fd)


PROBE = """
import atexit, json, os, sys
def _record():
    heavy = sorted(m for m in ("sklearn", "scipy", "matplotlib") if m in sys.modules)
    with open(os.path.join({folder!r}, f"modules-{{os.getpid()}}.json"), "w") as out:
        json.dump({{"argv": sys.argv, "heavy": heavy}}, out)
atexit.register(_record)
"""


def test_taste_model_choice_is_explained_with_a_plot(tmp_path, store, monkeypatch):
    """With enough mixed ratings the taste picker's model chooses; its explanation and plot are stored.
    The model (scikit-learn, scipy) and its plot (matplotlib) run in the worker's children, each in its
    own, never in the worker; the texts are embedded in a third."""
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(PROBE.format(folder=str(probe)))
    monkeypatch.setenv("PYTHONPATH", str(probe))
    config = make_config(tmp_path, model={"size": "64x64", "steps": 2}, display={"size": "80x48"},
                         taste={"min_ratings": 4, "explore_rate": 0.0, "themes": ("a stormy sea", "a calm meadow",
                                                                                    "a night city"),
                                "styles": ("oil painting",)})
    ctx = night.RenderContext(config, store, tmp_path)
    for n, (theme, liked) in enumerate([("a stormy sea", True), ("a calm meadow", False), ("a night city", True),
                                        ("a stormy sea", True), ("a calm meadow", False), ("a quiet lake", False)]):
        pid = store.add_picture(file=f"{n}.png", prompt=f"{theme}, oil painting", theme=theme, style="oil painting")
        store.rate(pid, "thumb", 1 if liked else -1)
    render_id = store.start_render("now", None)
    outcome, picture_id = night.render(ctx, render_id, "now")
    assert outcome.status == "done", outcome.error
    why = store.picture(picture_id).why
    assert why["mode"] == "model" and why["sentence"].startswith("expected liking")
    assert why["candidate"]["theme"] in config.taste.themes
    assert gallery.picture_path(tmp_path, why["plot"]).read_bytes()[:4] == b"\x89PNG"
    assert set(store.picture(picture_id).features) >= {"warmth", "drama"}
    # the render worker runs as `python -m frame.worker.render` (argv[0] is that file)
    processes = [json.loads(f.read_text()) for f in probe.glob("modules-*.json")]
    worker = [p for p in processes if p["argv"][0].endswith(os.path.join("worker", "render.py"))]
    children = {name: [p["heavy"] for p in processes if p["argv"][0].endswith(name + ".py")]
                for name in ("embedchild", "tastechild", "plotchild")}
    assert len(worker) == 1 and worker[0]["heavy"] == []
    # the model's libraries never share a process: scikit-learn + scipy to choose, matplotlib to draw
    assert children == {"embedchild": [[]], "tastechild": [["scipy", "sklearn"]], "plotchild": [["matplotlib"]]}


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux /proc")
def test_worker_reports_its_own_peak_not_its_parents(tmp_path):
    """ru_maxrss survives exec: a child of a 300 MB parent reports 300 MB there; VmHWM is its own."""
    import json
    import subprocess
    import sys

    ballast = bytearray(300 << 20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page
    code = ("import json, resource; from frame.worker.process import peak_rss_mb; "
            "print(json.dumps([peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))")
    own, inherited = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                               check=True).stdout)
    del ballast
    assert own < 150
    assert inherited > 300  # what the worker used to report


def test_a_picture_deleted_while_its_show_waits_says_so(ctx):
    """Show and delete of the same picture racing: the worker met FileNotFoundError and the notice
    blamed the panel's cable. Now the failure says the picture was deleted."""
    from frame.daemon import deletion
    from frame.daemon.notices import show_failure_notice

    picture_id = _stored_picture(ctx)
    panel_fd = os.open(ctx.state_dir / PANEL_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(panel_fd, fcntl.LOCK_EX)  # the show's worker waits for another refresh to end
    failure: list[BaseException] = []

    def show() -> None:
        try:
            night.show_picture(ctx, picture_id, "owner")
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            failure.append(exc)

    thread = threading.Thread(target=show)
    thread.start()
    time.sleep(1.0)
    deletion.delete_picture(ctx.store, ctx.state_dir, picture_id, {})
    os.close(panel_fd)
    thread.join(60)
    assert len(failure) == 1 and isinstance(failure[0], night.PictureDeleted)
    assert f"picture {picture_id} was deleted" in str(failure[0])
    notice = show_failure_notice(picture_id, deleted=isinstance(failure[0], night.PictureDeleted))
    assert "deleted" in notice and "cable" not in notice
    assert "cable" in show_failure_notice(picture_id)
