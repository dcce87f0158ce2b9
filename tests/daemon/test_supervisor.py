import json
import sys
import threading
import time
from pathlib import Path

from frame.daemon.jobs.supervisor import Supervisor, rss_mb
from frame.worker.events import ProgressEvent, ShowOutput

FAKE = [sys.executable, str(Path(__file__).with_name("fakeworker.py"))]


def _job(tmp_path, **spec):
    (tmp_path / "job.json").write_text(json.dumps({"steps": 5, **spec}))
    return tmp_path


def _supervisor(**kwargs):
    events, restarts = [], []
    sup = Supervisor(kwargs.pop("memory_limit_mb", 500), kwargs.pop("max_restarts", 3), command=FAKE,
                     on_event=events.append, on_restart=lambda n, why: restarts.append(why),
                     poll_seconds=0.05, **kwargs)
    return sup, events, restarts


def test_finishes_and_reports_progress(tmp_path):
    sup, events, restarts = _supervisor()
    outcome = sup.run(_job(tmp_path), stop=threading.Event())
    assert outcome.status == "done" and outcome.result == ShowOutput("shown", "attempt 1") and restarts == []
    assert [e.step for e in events if isinstance(e, ProgressEvent)] == [1, 2, 3, 4, 5]


def test_crashed_worker_is_restarted_and_resumes(tmp_path):
    sup, events, restarts = _supervisor()
    outcome = sup.run(_job(tmp_path, crash_at=[2, 4], crash_attempts=2), stop=threading.Event())
    assert outcome.status == "done" and outcome.restarts == 2
    assert restarts == ["signal SIGKILL", "signal SIGKILL"]
    # resumed: every step ran exactly once despite two deaths
    assert [e.step for e in events if isinstance(e, ProgressEvent)] == [1, 2, 3, 4, 5]


def test_gives_up_after_max_restarts(tmp_path):
    sup, _, restarts = _supervisor(max_restarts=2)
    outcome = sup.run(_job(tmp_path, crash_at=[1, 2, 3, 4, 5]), stop=threading.Event())
    assert outcome.status == "failed" and len(restarts) == 2
    assert "died 3 times" in outcome.error


def test_permanent_error_is_not_retried(tmp_path):
    sup, _, restarts = _supervisor()
    outcome = sup.run(_job(tmp_path, exit_code=3), stop=threading.Event())
    assert (outcome.status, outcome.step, outcome.error) == ("failed", "generate", "model missing")
    assert restarts == []


def test_memory_limit_kills_and_restarts(tmp_path):
    sup, _, restarts = _supervisor(memory_limit_mb=60, max_restarts=1)
    outcome = sup.run(_job(tmp_path, steps=50, grow_mb=10, delay=0.1), stop=threading.Event())
    assert outcome.status == "failed"
    assert restarts and restarts[0].startswith("memory limit")
    assert outcome.peak_rss_mb > 60


def test_deadline_and_stop_end_the_worker_quickly(tmp_path):
    sup, _, _ = _supervisor()
    started = time.monotonic()
    outcome = sup.run(_job(tmp_path, steps=1000, delay=0.05), stop=threading.Event(), deadline=time.time() + 0.3)
    assert outcome.status == "deadline" and time.monotonic() - started < 3
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    second = tmp_path / "second"
    second.mkdir()
    outcome = sup.run(_job(second, steps=1000, delay=0.05), stop=stop)
    assert outcome.status == "stopped" and sup.pid is None


def test_rss_of_missing_process():
    assert rss_mb(2**22 + 12345) is None
