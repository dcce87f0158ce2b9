"""The settings page's "import from a URL": ``frame model import URL <state_dir>/models/NAME`` in a child.

The import reads numpy and onnx (about 120 MB at its peak, docs/models.md), so it never runs in the
daemon; the daemon starts ``python -m frame model import`` and watches it, as it watches the
estimate child (``frame.daemon.jobs.estimate_child``). Its rules:

* one import at a time, and none started during a render (``ImportRefused``, with the reason). A render
  that starts while the import runs stops the child (the night has priority and both would compete for
  the Pi's 512 MB); the import waits until the render is over and starts again, and the importer keeps
  every graph it had completed (``frame.convert.importer.writer``: written aside, resumable);
* crash-safe: the job is recorded in ``<state_dir>/model-import.json`` (checksummed, written
  atomically, private: the URL may carry credentials) before the child starts, and ``resume`` at the
  daemon's start runs again a job the record says was running (a power cut, a restart): the importer
  resumes from its aside folder ``.NAME.import``;
* progress: the child's stderr goes to ``<state_dir>/model-import.log``; its byte progress lines
  ("converting [###...]  40% 800 MB of 2.14 GB") give the percentage the status page shows;
* the child's resident memory is polled and it is killed above ``worker.memory_limit_mb``.

URLs are http(s) only, and shown everywhere (page, API, log) with their credentials hidden.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from frame.daemon.jobs.children import watch_child
from frame.daemon.jobs.supervisor import worker_env
from frame.daemon.models_folder import models_dir, valid_name
from frame.errors import FrameError
from frame.redact import redact_text, redact_url
from frame.statefile import read_json, write_json

log = logging.getLogger(__name__)

STATE_FILE = "model-import.json"
LOG_FILE = "model-import.log"
WEIGHTS = ("fp16", "uint8", "fp32")
MAX_URL = 2048
TIME_LIMIT = 6 * 3600.0  # an SDXL file over the Pi's Wi-Fi is about 40 minutes of reading alone
POLL_SECONDS = 0.5
RENDER_STARTED = "a render started, and the night has priority"
STOPPING = "the frame is stopping"
PROGRESS = re.compile(r"converting \[[#.]*\]\s+(\d{1,3})%\s+(\S+ [MG]B of \S+ [MG]B)")
LOG_TAIL = 64 * 1024


class ImportRefused(FrameError):
    """An import cannot start now (one runs, a render runs) or with this URL, name or precision.
    ``field`` names the form field at fault ("" for none)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def check_url(url: Any) -> str:
    """The URL if it is an http(s) URL with a host and no spaces; ImportRefused naming what is wrong."""
    if not isinstance(url, str) or not url.strip():
        raise ImportRefused("give the URL of a .safetensors file (or of a diffusers folder, ending in /)", "url")
    url = url.strip()
    if len(url) > MAX_URL or any(c.isspace() or ord(c) < 32 for c in url):
        raise ImportRefused(f"not a usable URL (spaces, control characters, or over {MAX_URL} characters)", "url")
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        raise ImportRefused("not a usable URL", "url") from None
    if parts.scheme not in ("http", "https") or not host:
        raise ImportRefused(f"only http:// and https:// URLs can be imported, not {redact_url(url)[:100]}", "url")
    return url


def default_name(url: str) -> str:
    """The model's folder name from the URL's file name: ``.../dreamshaper_8.safetensors`` → dreamshaper_8."""
    last = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
    stem = re.sub(r"\.(safetensors|ckpt)$", "", last, flags=re.IGNORECASE)
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip(".-_")[:64]
    return name if valid_name(name) else "imported-model"


def import_command(url: str, target: Path, weights: str) -> list[str]:
    return [sys.executable, "-m", "frame", "model", "import", url, str(target), "--weights", weights]


class ModelImports:
    """The one model import of this frame: started from the page or the API, resumed at the daemon's start.

    ``rendering``: whether a render runs now (asked before starting and while the child runs)."""

    def __init__(self, state_dir: Path, rendering: Callable[[], bool], poll_seconds: float = POLL_SECONDS,
                 time_limit: float = TIME_LIMIT) -> None:
        self.state_dir = Path(state_dir)
        self.rendering = rendering
        self.poll_seconds, self.time_limit = poll_seconds, time_limit
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._waiting = False
        self._proc: subprocess.Popen | None = None

    @property
    def record_path(self) -> Path:
        return self.state_dir / STATE_FILE

    def _record(self) -> dict[str, Any] | None:
        data = read_json(self.record_path)
        ok = isinstance(data, dict) and all(isinstance(data.get(k), str) for k in ("url", "name", "weights", "status"))
        return data if ok else None

    def _write(self, record: dict[str, Any]) -> None:
        write_json(self.record_path, record, mode=0o600)  # the URL may carry credentials

    def state(self) -> dict[str, Any] | None:
        """The last import for the pages: name, URL (credentials hidden), status ("running", "waiting" for
        a render to end, "done", "failed"), percent, what it has read, the error. None: never imported."""
        record = self._record()
        if record is None:
            return None
        status = record["status"]
        if status == "running" and self._waiting:
            status = "waiting"
        percent, done = self._progress() if status in ("running", "waiting") else (None, "")
        return {"name": record["name"], "url": redact_url(record["url"]), "weights": record["weights"],
                "status": status, "percent": percent, "read": done, "error": redact_text(record.get("error") or ""),
                "active": status in ("running", "waiting")}

    def _progress(self) -> tuple[int, str]:
        try:
            with open(self.state_dir / LOG_FILE, "rb") as file:
                file.seek(0, 2)
                file.seek(max(0, file.tell() - LOG_TAIL))
                tail = file.read().decode("utf-8", "replace")
        except OSError:
            return 0, ""
        found = PROGRESS.findall(tail)
        return (min(100, int(found[-1][0])), found[-1][1]) if found else (0, "")

    def start(self, url: Any, name: Any, weights: Any, cap_mb: float) -> str:
        """Check the request and start the import; returns the model's name. ImportRefused when not."""
        url = check_url(url)
        name = (name or "").strip() if isinstance(name, str) else name
        name = name or default_name(url)
        if not valid_name(name):
            raise ImportRefused("a model's name is letters, digits, '.', '_' or '-' (up to 64, not starting "
                                "with a dot)", "name")
        if weights not in WEIGHTS:
            raise ImportRefused(f"the precision is one of {', '.join(WEIGHTS)}", "weights")
        target = models_dir(self.state_dir) / name
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                raise ImportRefused("an import is already running; its progress is on the status page")
            if self.rendering():
                raise ImportRefused("not while a render is running: both would compete for the frame's memory. "
                                    "Try again when it has finished")
            if target.exists():
                raise ImportRefused(f"a model named {name} already exists: choose another name", "name")
            target.parent.mkdir(parents=True, exist_ok=True)
            self._write({"url": url, "name": name, "weights": weights, "status": "running",
                         "started_at": time.time(), "error": ""})
            os.close(os.open(self.state_dir / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
            os.chmod(self.state_dir / LOG_FILE, 0o600)  # the child's messages may quote the URL
            self._launch(cap_mb)
        log.info("model import of %s into %s started (%s)", redact_url(url), target, weights)
        return name

    def resume(self, cap_mb: float) -> bool:
        """At the daemon's start: run again an import the record says was running; True if it did."""
        record = self._record()
        if record is None or record["status"] != "running":
            return False
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return False
            log.info("model import of %s: resuming after a stop", redact_url(record["url"]))
            self._launch(cap_mb)
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """The daemon is stopping: stop the child; the record stays "running", so the next start resumes."""
        self._stopping.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def kill_child(self) -> None:
        """Kill the child now, as a power cut would (the tests' way to cut an import short)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def wait(self, timeout: float) -> bool:
        """For tests and the CLI: wait for the thread; True when it has ended."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def _launch(self, cap_mb: float) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, args=(cap_mb,), name="model-import", daemon=True)
        self._thread.start()

    def _run(self, cap_mb: float) -> None:
        try:
            self._loop(cap_mb)
        except Exception as exc:  # the record must not stay "running" for ever on a bug
            log.exception("the model import could not run")
            self._finish("failed", f"internal error: {exc}")

    def _loop(self, cap_mb: float) -> None:
        record = self._record()
        if record is None:
            return
        try:  # the record is read back from disk: hostile like every file
            check_url(record["url"])
            if not valid_name(record["name"]) or record["weights"] not in WEIGHTS:
                raise ImportRefused("no usable model name or precision")
        except ImportRefused as exc:
            self._finish("failed", f"the import record {self.record_path} is not usable: {exc}")
            return
        target = models_dir(self.state_dir) / record["name"]
        target.parent.mkdir(parents=True, exist_ok=True)
        while not self._stopping.is_set():
            if self.rendering():
                self._waiting = True
                self._stopping.wait(self.poll_seconds)
                continue
            self._waiting = False
            if (target / "model_index.json").is_file() and not target.with_name(f".{target.name}.import").exists():
                self._finish("done", "")  # the child had renamed it into place before the stop
                return
            stopped, error = self._child(import_command(record["url"], target, record["weights"]), cap_mb)
            if stopped == RENDER_STARTED:
                log.info("model import paused: %s; it goes on when the render is over", stopped)
                continue
            if stopped == STOPPING:
                return
            self._finish("failed" if (stopped or error) else "done", f"stopped: {stopped}" if stopped else error or "")
            return

    def _child(self, command: list[str], cap_mb: float) -> tuple[str | None, str | None]:
        """Run one child to its end: (why it was stopped or None, its error or None)."""
        started = time.monotonic()
        with os.fdopen(os.open(self.state_dir / LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as err:
            proc = self._proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                                 env=worker_env(), close_fds=True)
            _, _, stopped, peak = watch_child(proc, cap_mb, f"the worker limit of {cap_mb:.0f} MiB", self.time_limit,
                                              self.poll_seconds, also_stop=self._also_stop)
        if stopped:
            return stopped, None
        if proc.returncode != 0:
            return None, self._last_line() or f"exit status {proc.returncode}"
        log.info("model import: done in %.0f s, peak %.0f MiB (polled)", time.monotonic() - started, peak)
        return None, None

    def _also_stop(self) -> str | None:
        if self._stopping.is_set():
            return STOPPING
        return RENDER_STARTED if self.rendering() else None

    def _last_line(self) -> str:
        try:
            lines = (self.state_dir / LOG_FILE).read_bytes()[-LOG_TAIL:].decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        wanted = [line.strip() for line in lines if line.strip() and not line.startswith(("converting", "  "))]
        return redact_text(wanted[-1][:300]) if wanted else ""

    def _finish(self, status: str, error: str) -> None:
        record = self._record()
        if record is None:
            return
        self._write({**record, "status": status, "error": error, "finished_at": time.time()})
        if status == "failed":
            log.error("model import of %s failed: %s", redact_url(record["url"]), redact_text(error))
        else:
            log.info("model import of %s: %s", redact_url(record["url"]), status)
