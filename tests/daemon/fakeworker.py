"""A stand-in worker speaking the worker protocol, for supervisor tests that need crashes, memory
growth or slowness on demand. ``JOB_DIR/job.json`` (plain JSON) says what to do; progress survives
restarts in ``JOB_DIR/step`` the way the real pipeline's checkpoint does."""

import json
import os
import signal
import sys
import time
from pathlib import Path

job_dir = Path(sys.argv[1])
job = json.loads((job_dir / "job.json").read_text())
step_file = job_dir / "step"
step = int(step_file.read_text()) if step_file.exists() else 0
attempt_file = job_dir / "attempts"
attempt = int(attempt_file.read_text()) + 1 if attempt_file.exists() else 1
attempt_file.write_text(str(attempt))
signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
hog = []
if job.get("exit_code") is not None:
    print(json.dumps({"event": "error", "step": "generate", "message": "model missing"}), flush=True)
    sys.exit(job["exit_code"])
while step < job["steps"]:
    time.sleep(job.get("delay", 0.02))
    if job.get("grow_mb"):
        hog.append(bytearray(job["grow_mb"] * 2**20))
    step += 1
    step_file.write_text(str(step))
    print(json.dumps({"event": "progress", "step": step, "steps": job["steps"]}), flush=True)
    if step in job.get("crash_at", []) and attempt <= job.get("crash_attempts", 99):
        os.kill(os.getpid(), signal.SIGKILL)
print(json.dumps({"event": "done", "result": {"status": "shown", "message": f"attempt {attempt}"}}), flush=True)
