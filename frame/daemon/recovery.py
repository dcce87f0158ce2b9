"""Opening the database safely: integrity check at start, a backup after every stored picture, and
recovery from that backup when the file is damaged (bad sectors on SD cards, power cuts on cheap
cards that lie about fsync). The damaged file is kept beside it for inspection, never deleted.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from frame.errors import FrameError

log = logging.getLogger(__name__)

BACKUP_SUFFIX = ".bak"


def backup_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + BACKUP_SUFFIX)


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


def _set_aside(path: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        part = Path(str(path) + suffix)
        if part.exists():
            part.replace(Path(str(aside) + suffix))
    return aside


def open_checked(path: Path, connect: Callable[[Path], sqlite3.Connection]) -> sqlite3.Connection:
    """Open and migrate ``path``; if it is damaged, move it aside and restore the backup (or start
    empty when there is none), logging exactly what happened."""
    existed = path.exists()
    conn, problem = _try_open(path, connect)
    if conn is not None:
        return conn
    if not existed:
        raise FrameError(f"cannot create the store {path}: {problem}")
    aside = _set_aside(path)
    log.error("the store %s is damaged (%s); moved it to %s", path, problem, aside)
    backup = backup_path(path)
    if backup.exists():
        shutil.copyfile(backup, path)
        conn, backup_problem = _try_open(path, connect)
        if conn is not None:
            log.warning("restored the store from its backup %s", backup)
            return conn
        log.error("the backup %s is damaged too (%s); starting an empty store", backup, backup_problem)
        _set_aside(path)
    conn, problem = _try_open(path, connect)
    if conn is None:
        raise FrameError(f"cannot create a new store at {path}: {problem}")
    return conn
