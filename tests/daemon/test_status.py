import time

from frame.daemon.status import LiveStatus


def test_progress_eta_and_status_line():
    status = LiveStatus()
    lines = []
    status.add_listener(lines.append)
    status.render_started(3, "night")
    status.render_progress(stage="generating", step=2, steps=10)
    time.sleep(0.05)
    status.render_progress(step=4)
    render = status.snapshot()["render"]
    assert 0 < render["eta_seconds"] < 5 and "_base" not in render
    assert lines[-1].startswith("rendering: generating step 4/10, ETA")
    status.render_progress(step=5, eta_seconds=42.0)
    assert status.snapshot()["render"]["eta_seconds"] == 42.0
    status.render_finished()
    status.update(shown={"picture_id": 9}, notice="render failed")
    assert lines[-1] == "showing picture 9 (render failed)"


def test_progress_without_render_is_ignored():
    status = LiveStatus()
    status.render_progress(step=1)
    assert status.snapshot()["render"] is None
