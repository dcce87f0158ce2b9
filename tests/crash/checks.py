"""What must hold after a power cut at any instant: file-level rules on the crash image itself, and the
daemon's real start path run on it (``StartProbe``) with its results checked against what had been
committed before the cut (``Expectations``, from the scenario's markers).

File rules (``FileLedger``), for every file under the traced folders except SQLite's own (the store,
its WAL/journal, the backup's temporary file), the atomic writer's temporaries, lock files and the
transient ``checkpoints/show-*`` and ``info-*`` folders (a show is never resumed; leftovers are removed
at start):

* a file is only ever replaced whole (temp + rename): a file written in place is a finding by itself;
* in every image it is absent or holds one of its complete versions — never torn;
* once the writer returned (the rename and, when it does one, the folder fsync right after it), the
  file holds that version or a newer one until something removes it: a completed checkpoint, job file,
  gallery picture or backup is never lost and never goes back.

Start-path rules (``probe_findings``): the start opens the state; every picture and rating committed
before the cut is still there, and in the backup taken right after (the history never shrinks); no
render that had finished is resumed; no picture record points at a missing or unreadable file; a
resumed render uses the seed of the job file that was on disk, and a render whose job file is gone is
never resumed under its id with a new seed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path

from tests.crash.fsimage import Image
from tests.crash.fsmodel import Effect


def _hash(data: bytes) -> bytes:
    return hashlib.sha1(data).digest()


def protected(path: str) -> bool:
    """Files the atomic-write rules apply to (see the module docstring)."""
    name = os.path.basename(path)
    if (name.startswith(".") and ".tmp-" in name) or name.endswith(".lock"):
        return False  # the atomic writer's temporaries; lock files (flock targets, never written)
    if re.search(r"(-wal|-shm|-journal)$", name) or name == "frame.db" or name.startswith("frame.db.bak.tmp"):
        return False
    return not re.search(r"/checkpoints/(show|info)-", path)


@dataclass
class Version:
    digest: bytes
    index: int
    completed: float


class FileLedger:
    """Every version each protected path had, when it appeared, when its writer had returned."""

    def __init__(self, initial: dict[str, bytes]) -> None:
        self.versions: dict[str, list[Version]] = {
            p: [Version(_hash(data), -1, -1)] for p, data in initial.items() if protected(p)}
        self.removals: dict[str, list[int]] = {}
        self.pending: dict[int, tuple[str, Version]] = {}
        self.in_place: dict[str, int] = {}

    def add(self, effect: Effect) -> None:
        waiting = self.pending.pop(effect.pid, None)
        if waiting is not None:
            path, version = waiting
            if effect.kind == "sync" and effect.is_dir and effect.path == os.path.dirname(path):
                version.completed = effect.index
                return
            version.completed = version.index
        if effect.kind in ("unlink", "rmdir"):
            self._remove(effect.path, effect.index, subtree=effect.kind == "rmdir")
        elif effect.kind in ("rename", "link"):
            if effect.kind == "rename":
                self._remove(effect.path, effect.index, subtree=effect.is_dir)
            if effect.target and protected(effect.target) and not effect.is_dir:
                version = Version(_hash(effect.content or b""), effect.index, float("inf"))
                self.versions.setdefault(effect.target, []).append(version)
                self.pending[effect.pid] = (effect.target, version)
        elif effect.kind == "create" and protected(effect.path):
            self.versions.setdefault(effect.path, []).append(Version(_hash(b""), effect.index, effect.index))
        elif effect.kind == "write" and protected(effect.path):
            self.in_place.setdefault(effect.path, effect.index)

    def _remove(self, path: str, index: int, subtree: bool) -> None:
        for known in self.versions:
            if known == path or (subtree and known.startswith(path + os.sep)):
                self.removals.setdefault(known, []).append(index)

    def finish(self) -> None:
        for _, version in self.pending.values():
            version.completed = version.index
        self.pending.clear()

    def trace_findings(self) -> list[str]:
        return [f"{path} is written in place (not through a temporary file and a rename)"
                for path in sorted(self.in_place)]

    def check(self, k: int, image: Image) -> list[str]:
        """Findings for the crash image taken after the first ``k`` calls."""
        findings = []
        for path, versions in self.versions.items():
            live = [v for v in versions if v.index < k]
            if not live:
                continue
            removed = max((i for i in self.removals.get(path, ()) if i < k), default=-2)
            required = None
            for version in live:
                if version.completed < k and version.index > removed:
                    required = version
            allowed = {v.digest for v in live if required is None or v.index >= required.index}
            if path in image.files:
                digest = _hash(image.files[path])
                if digest not in allowed:
                    older = any(v.digest == digest for v in live)
                    findings.append(f"{path}: {'older than a completed write' if older else 'torn or unknown content'}")
            elif required is not None:
                findings.append(f"{path}: a completed write is lost (the file is missing)")
        return findings


# what had been committed ---------------------------------------------------------------------------

@dataclass
class Expected:
    pictures: set[int] = field(default_factory=set)
    ratings: dict[int, int] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)

    def copy(self) -> Expected:
        return Expected(set(self.pictures), dict(self.ratings), set(self.finished))


class Expectations:
    """The committed history after each scenario marker; ``at(k)`` is what a cut after call ``k`` keeps."""

    def __init__(self, marks: list[tuple[int, str]], initial: Expected, initial_backup: Expected) -> None:
        self.steps: list[tuple[int, Expected]] = [(-1, initial)]
        current, backup = initial.copy(), initial_backup.copy()
        for index, text in marks:
            event = json.loads(text)
            kind = event["e"]
            if kind == "picture":
                current.pictures.add(event["id"])
            elif kind == "rating":
                current.ratings[event["id"]] = event["picture"]
            elif kind == "deleting":
                current.pictures.discard(event["id"])
                current.ratings = {r: p for r, p in current.ratings.items() if p != event["id"]}
            elif kind == "render_finished":
                current.finished.add(event["id"])
            elif kind == "backup":
                backup = Expected(set(event["pictures"]), dict(event["ratings"]), set(event["finished"]))
            elif kind == "damage":
                current = backup.copy()
            self.steps.append((index, current.copy()))

    def at(self, k: int) -> Expected:
        found = self.steps[0][1]
        for index, expected in self.steps:
            if index < k:
                found = expected
        return found


# the start path ------------------------------------------------------------------------------------

class ProbeSupervisor:
    """Stands in for the render worker at start: records which job the start path resumes or starts
    (render id and the seed in its job file), then reports 'stopped' as a shutdown would."""

    runs: list[tuple[int | None, int | None]] = []

    def __init__(self, *args, **kwargs) -> None:
        self.pid = None

    def run(self, job_dir: Path, *, stop: threading.Event, deadline: float | None = None):
        from frame.daemon.jobs.supervisor import Outcome
        from frame.statefile import read_json

        job = read_json(Path(job_dir) / "job.json") or {}
        ProbeSupervisor.runs.append((job.get("render_id"), job.get("seed")))
        stop.set()
        return Outcome("stopped")


@dataclass
class ProbeResult:
    error: str | None = None
    pictures: dict[int, tuple[str | None, ...]] = field(default_factory=dict)
    ratings: set[int] = field(default_factory=set)
    running: set[int] = field(default_factory=set)
    runs: list[tuple[int | None, int | None]] = field(default_factory=list)
    backup_error: str | None = None
    backup_pictures: set[int] = field(default_factory=set)
    missing_files: list[str] = field(default_factory=list)
    crash_running: set[int] = field(default_factory=set)
    crash_seeds: dict[int, int | None] = field(default_factory=dict)


def materialize(image: Image, roots: list[Path]) -> None:
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)
    for path in sorted(image.dirs, key=len):
        os.makedirs(path, exist_ok=True)
    for path, data in image.files.items():
        with open(path, "wb") as handle:
            handle.write(data)


@dataclass
class CrashView:
    """What the start path can observe of an image: ``key`` (equal keys behave the same at start) and
    the facts the seed rule needs — renders the cut left 'running', seeds of the job files on disk."""

    key: tuple
    running: set[int]
    seeds: dict[int, int | None]


def _ignored_at_start(name: str) -> bool:
    """Files whose content the start path never reads: temporaries, set-aside copies, lock files."""
    return (name.startswith(".") and ".tmp-" in name) or ".corrupt-" in name or name.endswith(".lock")


def _database_view(files: dict[str, bytes], db: Path, scratch: Path) -> tuple[tuple, set[int]]:
    """The logical content of the store (every row of every table, after SQLite's own recovery of the
    WAL or journal on a scratch copy), or the raw bytes when SQLite cannot read it."""
    main = files.get(str(db))
    if main is None:
        return ("missing", str(db) + "-wal" in files), set()
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for suffix in ("", "-wal", "-journal"):
        data = files.get(str(db) + suffix)
        if data is not None:
            (scratch / f"{db.name}{suffix}").write_bytes(data)
    shape = (len(main) == 0, main[:16] == b"SQLite format 3\0")
    try:
        conn = sqlite3.connect(scratch / db.name)
        try:
            check = tuple(r[0] for r in conn.execute("PRAGMA quick_check"))
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            rows = tuple((t, tuple(conn.execute(f'SELECT * FROM "{t}" ORDER BY rowid'))) for t in tables)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            running = set()
            if "renders" in tables:
                running = {r[0] for r in conn.execute("SELECT id FROM renders WHERE status = 'running'")}
        finally:
            conn.close()
        return (shape, check, version, rows), running
    except sqlite3.Error as exc:
        raw = hashlib.sha1(b"".join(files.get(str(db) + s, b"") for s in ("", "-wal", "-journal"))).digest()
        return (shape, "unreadable", str(exc), raw), set()


def crash_view(image: Image, state: Path, scratch: Path) -> CrashView:
    db = state / "frame.db"
    database, running = _database_view(image.files, db, scratch)
    others, seeds = [], {}
    prefix = str(state) + os.sep
    for path in sorted(image.files):
        if not path.startswith(prefix) or path.startswith(str(db)) and not path.startswith(str(db) + ".bak"):
            continue
        name = os.path.basename(path)
        if _ignored_at_start(name):
            continue
        others.append((path, _hash(image.files[path])))
        match = re.search(r"checkpoints/render-(\d+)/job\.json$", path)
        if match:
            try:
                seeds[int(match.group(1))] = json.loads(image.files[path])["data"]["seed"]
            except (ValueError, KeyError, TypeError):
                seeds[int(match.group(1))] = None
    folders = tuple(sorted(d for d in image.dirs
                           if d.startswith(prefix) and not _ignored_at_start(os.path.basename(d))))
    return CrashView((database, tuple(others), folders), running, seeds)


class _NoSocket:
    """Stands in for the HTTP server during the start probe: serving reads nothing from the state
    folder, and binding and closing a socket hundreds of times would dominate the harness's time."""

    def __init__(self, app, listen) -> None:
        self.port = 0

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass


def run_start(config, image: Image, roots: list[Path], view: CrashView) -> ProbeResult:
    """Put ``image`` on disk, run ``Daemon.__init__`` + ``start()`` (resume or catch up), take the next
    backup as the night would, stop, and read back what the daemon left."""
    from frame.daemon import service
    from frame.daemon.store.recovery import backup_path

    state = Path(config.state_dir)
    result = ProbeResult(crash_running=view.running, crash_seeds=view.seeds)
    materialize(image, roots)
    ProbeSupervisor.runs = []
    daemon = None
    server, service.HttpServer = service.HttpServer, _NoSocket
    try:
        daemon = service.Daemon(config, supervisor_factory=ProbeSupervisor)
        daemon.start()
        for thread in list(daemon._threads):
            thread.join(timeout=20)
        try:
            daemon.store.backup(backup_path(daemon.store.path))
        except Exception as exc:  # noqa: BLE001 - any failure is a finding
            result.backup_error = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        if daemon is not None:
            daemon.stop()
        service.HttpServer = server
    result.runs = list(ProbeSupervisor.runs)
    if result.error is None:
        _read_after(state, result)
    return result


def _read_after(state: Path, result: ProbeResult) -> None:
    from PIL import Image as PilImage

    conn = sqlite3.connect(state / "frame.db")
    try:
        rows = conn.execute("SELECT id, file, panel_file, json_extract(why, '$.plot') FROM pictures").fetchall()
        result.pictures = {r[0]: tuple(r[1:]) for r in rows}
        result.ratings = {r[0] for r in conn.execute("SELECT id FROM ratings")}
        result.running = {r[0] for r in conn.execute("SELECT id FROM renders WHERE status = 'running'")}
    finally:
        conn.close()
    for picture_id, names in result.pictures.items():
        for name in names:
            if not name:
                continue
            path = state / "gallery" / name
            try:
                with PilImage.open(io.BytesIO(path.read_bytes())) as picture:
                    picture.load()
            except Exception as exc:  # noqa: BLE001
                result.missing_files.append(f"picture {picture_id} -> {name} ({type(exc).__name__})")
    try:
        backup = sqlite3.connect(f"{(state / 'frame.db.bak').as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            result.backup_pictures = {r[0] for r in backup.execute("SELECT id FROM pictures")}
        finally:
            backup.close()
    except sqlite3.Error as exc:
        result.backup_error = result.backup_error or f"backup unreadable: {exc}"


def probe_findings(result: ProbeResult, expected: Expected) -> list[str]:
    if result.error:
        return [f"the start path failed: {result.error}"]
    findings = []
    lost = expected.pictures - set(result.pictures)
    if lost:
        findings.append(f"committed pictures lost: {sorted(lost)}")
    lost_ratings = {r for r, p in expected.ratings.items() if p in expected.pictures} - result.ratings
    if lost_ratings:
        findings.append(f"committed ratings lost: {sorted(lost_ratings)}")
    reopened = expected.finished & (result.running | {r for r, _ in result.runs})
    if reopened:
        findings.append(f"finished renders are running again: {sorted(reopened)}")
    findings += [f"record points at a missing or unreadable file: {m}" for m in result.missing_files]
    for render_id, seed in result.runs:
        if render_id in result.crash_running:
            on_disk = result.crash_seeds.get(render_id)
            if on_disk is None:
                findings.append(f"render {render_id} resumed although its job file was gone (new seed {seed})")
            elif on_disk != seed:
                findings.append(f"render {render_id} resumed with seed {seed}, its job file said {on_disk}")
    if result.backup_error:
        findings.append(f"the next backup failed: {result.backup_error}")
    elif expected.pictures - result.backup_pictures:
        missing = sorted(expected.pictures - result.backup_pictures)
        findings.append(f"the next backup lacks committed pictures {missing}")
    return findings
