"""The worker's progress lines carry the bytes fetched per step and the link rate to the daemon, and
only stage and progress events reach the live status (issue 15, finding F1)."""

from __future__ import annotations

import json
import logging
import sys
import threading

from frame.daemon.jobs import night
from frame.daemon.jobs.night import RenderContext
from frame.daemon.status import LiveStatus
from frame.diffusion.progress import Progress
from frame.worker.events import ProgressEvent, event_json, parse_event
from frame.worker.render import ProgressRelay


def test_relay_passes_bytes_per_step_and_link_rate_to_the_live_status(tmp_path):
    events = []
    relay = ProgressRelay(tmp_path, events.append)
    relay(Progress("unet", 2, 20, 0.0, 0.1, 900.0, step_done=True, bytes_per_step=3437361936, link_rate=4.1e6))
    relay(Progress("unet", 3, 20, 0.0, 0.15, 850.0, step_done=True))  # a stand-in model: nothing counted
    lines = [event_json(event) for event in events]
    assert (lines[0]["bytes_per_step"], lines[0]["link_rate"]) == (3437361936, 4100000)
    assert "bytes_per_step" not in lines[1] and "link_rate" not in lines[1]
    status = LiveStatus()
    status.render_started(1, "night")
    status.render_progress(**parse_event(json.dumps(lines[0])).progress())
    render = status.snapshot()["render"]
    assert (render["bytes_per_step"], render["link_rate"]) == (3437361936, 4100000)


def test_an_error_event_after_progress_leaves_the_status_intact(tmp_path, config, store, caplog, monkeypatch):
    """0.1 forwarded the error event's ``step`` (a step *name*) as the progress step: the status
    listener raised TypeError (logged as "progress listener failed") and the status kept
    ``step: "generate"``, so the phone page's progress bar answered 500 until the render ended."""
    script = tmp_path / "worker.py"
    lines = [{"event": "stage", "stage": "generating", "steps": 8},
             {"event": "progress", "stage": "generating (unet)", "step": 2, "steps": 8, "fraction": 0.25},
             {"event": "error", "step": "generate", "message": "MemoryError: out of memory"}]
    script.write_text("import sys\n" + "".join(f"print({json.dumps(json.dumps(line))}, flush=True)\n"
                                               for line in lines) + "sys.exit(3)\n")
    seen = []
    status = LiveStatus()
    status.render_started(1, "night")
    status.add_listener(lambda line: seen.append(status.snapshot()["render"]))
    ctx = RenderContext(config, store, tmp_path, status=status, stop=threading.Event())
    monkeypatch.setattr(night, "worker_command", lambda entry: [sys.executable, str(script)])
    with caplog.at_level(logging.ERROR):
        outcome = night._supervise(ctx, tmp_path, None, 0, None)
    assert outcome.status == "failed" and (outcome.step, outcome.error) == ("generate", "MemoryError: out of memory")
    render = status.snapshot()["render"]
    assert render["step"] == 2 and render["steps"] == 8 and render["stage"] == "generating (unet)"
    assert all(isinstance(r["step"], int) for r in seen)
    assert not [r for r in caplog.records if "listener failed" in r.getMessage()]
    assert isinstance(parse_event(json.dumps(lines[1])), ProgressEvent)

