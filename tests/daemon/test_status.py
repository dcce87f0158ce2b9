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


def test_the_vae_and_the_panel_stages_keep_the_bar_full():
    """Issue 29 item 15: the VAE reports steps 0, which emptied the progress bar after the last step,
    and it stayed empty while preparing for the panel."""
    status = LiveStatus()
    status.render_started(3, "now")
    status.render_progress(stage="generating (unet)", step=8, steps=8, fraction=1.0)
    status.render_progress(stage="generating (vae)", step=0, steps=0, fraction=1.0)
    render = status.snapshot()["render"]
    assert (render["stage"], render["step"], render["steps"]) == ("generating (vae)", 8, 8)
    status.render_progress(stage="preparing for the panel")
    render = status.snapshot()["render"]
    assert (render["stage"], render["step"], render["steps"]) == ("preparing for the panel", 8, 8)
