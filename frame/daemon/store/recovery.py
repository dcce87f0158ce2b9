"""Opening the database safely: integrity check at start, a backup after every stored picture, and
recovery from that backup when the file is damaged (bad sectors on SD cards, power cuts on cheap
cards that lie about fsync). The damaged file is kept beside it for inspection, never deleted.

Every step is ordered so that a power cut at any instant leaves a state the next start recovers from
(``tests/crash`` replays each one; ``docs/durability.md``):

* a store that is missing while its backup exists, or 0 bytes, or without the SQLite header, is
  damaged — never silently a new empty store;
* restoring: the damaged file's WAL/journal is moved aside first (it must never be replayed onto the
  restored copy), the damaged file is hard-linked aside, then the backup is written over ``frame.db``
  with the atomic writer — ``frame.db`` is the damaged file or the restored one, never missing or empty;
* a backup is written to a temporary name (stale ones from a cut are removed first), synced by SQLite,
  renamed over the old backup and the folder fsynced; an empty store never replaces a backup that
  holds pictures or ratings.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from frame.atomicfile import fsync_dir, replace_durably, write_bytes_atomic
from frame.errors import FrameError

log = logging.getLogger(__name__)

BACKUP_SUFFIX = ".bak"
SQLITE_HEADER = b"SQLite format 3\0"
_SIDE_FILES = ("-wal", "-journal")


def backup_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + BACKUP_SUFFIX)


def file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a store SQLite would open as it is (None when it looks like one).

    SQLite opens a 0-byte file as a new, empty database; after a power cut that is a lost store."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return "missing"
    if not header:
        return "the file is empty (0 bytes)"
    if header != SQLITE_HEADER:
        return "the file has no SQLite header"
    return None


def _healthy(conn: sqlite3.Connection) -> str | None:
    rows = conn.execute("PRAGMA quick_check").fetchall()
    result = [r[0] for r in rows]
    return None if result == ["ok"] else "; ".join(str(r) for r in result[:3])


def _try_open(path: Path, connect: Callable[[Path], sqlite3.Connection]) -> tuple[sqlite3.Connection | None, str]:
    try:
        conn = connect(path)
    except sqlite3.DatabaseError as exc:
        return None, str(exc)
    try:
        problem = _healthy(conn)
    except sqlite3.DatabaseError as exc:
        problem = str(exc)
    if problem:
        conn.close()
        return None, problem
    return conn, ""


def _aside_name(path: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    number = 1
    while any(Path(str(aside) + s).exists() for s in ("", *_SIDE_FILES)):
        number += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{number}")
    return aside


def _set_aside(path: Path, keep_in_place: bool = True) -> Path:
    """Keep the damaged store under ``<name>.corrupt-<time>`` and take its WAL/journal out of the way.

    The WAL and journal are renamed first: replayed onto another file they would damage it. The main
    file is hard-linked, not renamed, so ``path`` never stops existing (a cut here just repeats the
    recovery); where hard links are not supported it is renamed (a missing store with a backup is
    restored at the next start, too). ``keep_in_place=False`` moves it (a damaged backup)."""
    aside = _aside_name(path)
    for suffix in _SIDE_FILES:
        part = Path(str(path) + suffix)
        if part.exists():
            part.replace(Path(str(aside) + suffix))
    Path(str(path) + "-shm").unlink(missing_ok=True)  # an index of the old WAL, rebuilt by SQLite
    if path.exists():
        try:
            if not keep_in_place:
                raise OSError("move, do not link")
            os.link(path, aside)
        except OSError:
            path.replace(aside)
    fsync_dir(path.parent)
    return aside


def _restore(path: Path, backup: Path, connect: Callable[[Path], sqlite3.Connection]) -> sqlite3.Connection | None:
    """Write ``backup`` over ``path`` atomically and open it; None (backup set aside) when it is damaged."""
    problem = file_problem(backup)
    if problem is None:
        write_bytes_atomic(path, backup.read_bytes())
        conn, problem = _try_open(path, connect)
        if conn is not None:
            log.warning("restored the store from its backup %s", backup)
            return conn
    aside = _set_aside(backup, keep_in_place=False)
    log.error("the backup %s is damaged too (%s); moved it to %s and starting an empty store",
              backup, problem, aside)
    for suffix in ("", *_SIDE_FILES, "-shm"):  # the copy of the damaged backup, if it got that far
        Path(str(path) + suffix).unlink(missing_ok=True)
    fsync_dir(path.parent)
    return None


def open_checked(path: Path, connect: Callable[[Path], sqlite3.Connection]) -> sqlite3.Connection:
    """Open and migrate ``path``; if it is damaged or missing while a backup exists, keep the damaged
    file aside and restore the backup (or start empty when there is no usable backup), logging exactly
    what happened."""
    backup = backup_path(path)
    problem = file_problem(path)
    conn = None
    if problem == "missing" and backup.exists():
        log.error("the store %s is missing but its backup %s exists; restoring the backup", path, backup)
        _set_aside(path)  # a WAL or journal left without its database must not be replayed onto the copy
        conn = _restore(path, backup, connect)
    elif problem == "missing":
        conn, problem = _try_open(path, connect)
        if conn is None:
            raise FrameError(f"cannot create the store {path}: {problem}")
        return conn
    else:
        if problem is None:
            conn, problem = _try_open(path, connect)
            if conn is not None:
                return conn
        aside = _set_aside(path)
        log.error("the store %s is damaged (%s); moved it to %s", path, problem, aside)
        if backup.exists():
            conn = _restore(path, backup, connect)
        else:
            log.error("there is no backup %s; starting an empty store", backup)
            path.unlink(missing_ok=True)
            fsync_dir(path.parent)
    if conn is None:
        conn, problem = _try_open(path, connect)
        if conn is None:
            raise FrameError(f"cannot create a new store at {path}: {problem}")
    return conn


def history_size(conn: sqlite3.Connection) -> int:
    """Pictures plus ratings: what an owner would call the frame's history."""
    return conn.execute("SELECT (SELECT COUNT(*) FROM pictures) + (SELECT COUNT(*) FROM ratings)").fetchone()[0]


def _backup_history(target: Path) -> int:
    try:  # immutable: no lock and no -wal/-shm files beside the backup
        conn = sqlite3.connect(f"{target.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error:
        return 0
    try:
        return history_size(conn)
    except sqlite3.Error:
        return 0  # an unreadable backup protects nothing: replacing it is right
    finally:
        conn.close()


def write_backup(conn: sqlite3.Connection, target: Path) -> bool:
    """Copy the open store to ``target`` durably (SQLite backup API); False when refused.

    Refused when the store is empty but ``target`` holds a history: an empty store after a start
    that found nothing usable must not overwrite the one good copy."""
    if history_size(conn) == 0 and target.exists() and _backup_history(target) > 0:
        log.error("the store is empty but its backup %s holds pictures or ratings; not replacing the backup",
                  target)
        return False
    tmp = target.with_name(target.name + ".tmp")
    for suffix in ("", "-journal", "-wal", "-shm"):  # left by a cut or a crash mid-backup
        Path(str(tmp) + suffix).unlink(missing_ok=True)
    dest = sqlite3.connect(tmp)
    try:
        dest.execute("PRAGMA journal_mode = OFF")  # a new file: on failure the whole temp is discarded
        dest.execute("PRAGMA synchronous = FULL")  # the copy is fdatasynced before the backup returns
        conn.backup(dest)
    except BaseException:
        dest.close()
        tmp.unlink(missing_ok=True)
        raise
    dest.close()
    replace_durably(tmp, target)
    return True
