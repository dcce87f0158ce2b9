"""The worker's progress lines carry the bytes fetched per step and the link rate to the daemon."""

from __future__ import annotations

from frame.daemon.jobs.night import PROGRESS_FIELDS
from frame.daemon.status import LiveStatus
from frame.diffusion.progress import Progress
from frame.worker.render import ProgressRelay


def test_relay_passes_bytes_per_step_and_link_rate_to_the_live_status(tmp_path):
    lines = []
    relay = ProgressRelay(tmp_path, lambda event, **fields: lines.append(fields))
    relay(Progress("unet", 2, 20, 0.0, 0.1, 900.0, step_done=True, bytes_per_step=3437361936, link_rate=4.1e6))
    relay(Progress("unet", 3, 20, 0.0, 0.15, 850.0, step_done=True))  # a stand-in model: nothing counted
    assert (lines[0]["bytes_per_step"], lines[0]["link_rate"]) == (3437361936, 4100000)
    assert "bytes_per_step" not in lines[1] and "link_rate" not in lines[1]
    status = LiveStatus()
    status.render_started(1, "night")
    status.render_progress(**{k: lines[0][k] for k in PROGRESS_FIELDS if k in lines[0]})
    render = status.snapshot()["render"]
    assert (render["bytes_per_step"], render["link_rate"]) == (3437361936, 4100000)
