"""The daemon's SQLite store (WAL) in the state directory: pictures, ratings, queued prompts, feed
items, render history, what was shown and feed health.

Every commit is durable when it returns (``synchronous = FULL``: the WAL is fdatasynced at each
commit). A rating answered with 200 survives a power cut, and the night's picture record is on the card
before its job folder is removed. Measured by ``benchmarks/durability.py`` (``docs/durability.md``):
6 more fdatasyncs per night than ``NORMAL`` (+19 ms on the test machine), against a render of minutes.

One ``Store`` is shared by the daemon's threads (scheduler, HTTP server, supervisor), so every call
takes a lock and runs in autocommit mode or one explicit transaction. Pictures' *files* live in the
gallery folder (see ``gallery.py``); only their names relative to it are stored here.

Ratings: ``thumb`` (+1 like / -1 dislike) or ``stars`` (1..5). A picture's rating is its latest one;
it is a *favourite* when that is a like or 4 or more stars (``FAVOURITE_SQL``). Favourites are what the
fallback and the daytime rotation show, and retention never deletes them.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from frame.atomicfile import make_dirs
from frame.daemon.store.migrations import migrate
from frame.daemon.store.prompt_rows import PromptQueueRows
from frame.daemon.store.records import (
    FeedHealth,
    RememberedRating,
    RenderRow,
    ShownEvent,
    StoredPicture,
    now_iso,
)
from frame.daemon.store.recovery import open_checked, write_backup

log = logging.getLogger(__name__)

DB_NAME = "frame.db"
SYNCHRONOUS = "FULL"  # see the module docstring; benchmarks/durability.py measures NORMAL against it
JSON_COLUMNS = ("features", "why", "timings")
PICTURE_FIELDS = (
    "night", "file", "panel_file", "bytes", "prompt", "negative_prompt", "theme", "style", "origin",
    "seed", "sampler", "steps", "guidance", "width", "height", "model", "features", "why", "timings",
)
_LATEST_RATING = (
    "(SELECT r.{col} FROM ratings r WHERE r.picture_id = p.id ORDER BY r.id DESC LIMIT 1)")
FAVOURITE_SQL = (
    f"(({_LATEST_RATING.format(col='kind')} = 'thumb' AND {_LATEST_RATING.format(col='value')} = 1) OR "
    f"({_LATEST_RATING.format(col='kind')} = 'stars' AND {_LATEST_RATING.format(col='value')} >= 4))")
_PICTURE_SELECT = (
    f"SELECT p.*, {_LATEST_RATING.format(col='kind')} AS rating_kind, "
    f"{_LATEST_RATING.format(col='value')} AS rating_value, {FAVOURITE_SQL} AS favourite FROM pictures p")


# above every id in use and ``picture_id_floor`` (ids of deleted pictures are never handed out again)
_NEXT_PICTURE_ID = ("(SELECT MAX(COALESCE(MAX(id), 0), (SELECT value FROM counters WHERE name = 'picture_id_floor'))"
                    " + 1 FROM pictures)")


def _picture_row(row: sqlite3.Row) -> StoredPicture:
    data = dict(row)
    for column in JSON_COLUMNS:
        data[column] = json.loads(data[column]) if data.get(column) else None
    return StoredPicture.from_row(data)


class Store(PromptQueueRows):
    """Thread-safe access to ``<state_dir>/frame.db``; open with ``Store.open(state_dir)``. The prompt
    queue's methods are written in ``prompt_rows`` (``PromptQueueRows``) and run on this connection."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._lock = threading.RLock()

    @classmethod
    def open(cls, state_dir: str | Path) -> Store:
        """Open (creating and migrating) the store; a damaged database is set aside and rebuilt from
        the last backup (see ``recovery.open_checked``)."""

        state = Path(state_dir).expanduser()
        make_dirs(state)
        path = state / DB_NAME
        conn = open_checked(path, connect)
        return cls(conn, path)

    @classmethod
    def open_read_only(cls, state_dir: str | Path) -> Store | None:
        """The existing store, for reading only, or None when there is none yet: what a read-only
        command (``frame status`` without a daemon) uses, so it never creates ``frame.db`` (nor its
        folder, nor SQLite's -wal/-shm files) owned by whoever ran it (root, in the installer).

        With the daemon's -wal and -shm files present the database is opened ``mode=ro`` (they exist,
        so nothing is created); without them the main file holds everything and is read
        ``immutable`` (SQLite then creates no side files). Not migrated: an older schema's rows may
        lack newer columns (``sqlite3.Error`` on the query; the daemon migrates at its start)."""
        path = Path(state_dir).expanduser() / DB_NAME
        if not path.is_file():
            return None
        sides = all(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm"))
        mode = "mode=ro" if sides else "mode=ro&immutable=1"
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?{mode}", uri=True, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        return cls(conn, path)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One explicit transaction (rolled back on any exception)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                if self._conn.in_transaction:  # SQLite already rolled back after e.g. SQLITE_FULL
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def query(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def execute(self, sql: str, params: tuple | dict = ()) -> int:
        """Run one statement in autocommit mode; return lastrowid."""
        with self._lock:
            return self._conn.execute(sql, params).lastrowid

    def backup(self, target: Path) -> bool:
        """Consistent online copy of the database, durable when it returns (``recovery.write_backup``);
        False when refused because the store is empty and ``target`` is not."""

        with self._lock:
            return write_backup(self._conn, target)

    # pictures -------------------------------------------------------------------------------------

    def add_picture(self, **fields: Any) -> int:
        unknown = set(fields) - set(PICTURE_FIELDS)
        if unknown:
            raise ValueError(f"unknown picture fields: {sorted(unknown)}")
        values = {k: json.dumps(v) if k in JSON_COLUMNS and v is not None else v for k, v in fields.items()}
        values["created_at"] = now_iso()
        columns = ", ".join(values)
        marks = ", ".join(f":{k}" for k in values)
        return self.execute(f"INSERT INTO pictures (id, {columns}) VALUES ({_NEXT_PICTURE_ID}, {marks})", values)

    def picture(self, picture_id: int) -> StoredPicture | None:
        rows = self.query(f"{_PICTURE_SELECT} WHERE p.id = ?", (picture_id,))
        return _picture_row(rows[0]) if rows else None

    def pictures(self, limit: int = 50, offset: int = 0, favourites_only: bool = False,
                 painted_only: bool = False) -> list[StoredPicture]:
        """Newest first. ``painted_only`` leaves out the owner's uploaded photos (the public gallery)."""
        where = " AND ".join(([FAVOURITE_SQL] if favourites_only else [])
                             + (["p.origin IS NOT 'upload'"] if painted_only else []))
        rows = self.query(f"{_PICTURE_SELECT} {'WHERE ' + where if where else ''} ORDER BY p.id DESC LIMIT ? OFFSET ?",
                          (limit, offset))
        return [_picture_row(r) for r in rows]

    def count_pictures(self, painted_only: bool = False) -> int:
        where = " WHERE origin IS NOT 'upload'" if painted_only else ""
        return self.query(f"SELECT COUNT(*) FROM pictures{where}")[0][0]

    def picture_ids(self) -> list[int]:
        """Every picture's id, oldest first (what the next/previous buttons step through)."""
        return [r[0] for r in self.query("SELECT id FROM pictures ORDER BY id")]

    def count_newer_pictures(self, picture_id: int) -> int:
        """How many pictures are newer than ``picture_id``: its offset in the newest-first gallery."""
        return self.query("SELECT COUNT(*) FROM pictures WHERE id > ?", (picture_id,))[0][0]

    def least_recently_shown(self, picture_ids: list[int]) -> int | None:
        """Of ``picture_ids``, one never shown (the lowest id) or else the one shown longest ago; None
        for an empty list or ids that name no picture (the fallback's favourite)."""
        if not picture_ids:
            return None
        marks = ",".join("?" * len(picture_ids))
        rows = self.query(
            f"SELECT p.id FROM pictures p LEFT JOIN shown s ON s.picture_id = p.id WHERE p.id IN ({marks}) "
            "GROUP BY p.id ORDER BY MAX(s.id) IS NOT NULL, MAX(s.id) LIMIT 1", tuple(picture_ids))
        return rows[0][0] if rows else None

    def favourite_ids(self) -> list[int]:
        return [r[0] for r in self.query(f"SELECT p.id FROM pictures p WHERE {FAVOURITE_SQL} ORDER BY p.id")]

    def upload_ids(self) -> list[int]:
        """The owner's uploaded photos (``origin`` "upload"), oldest first."""
        return [r[0] for r in self.query("SELECT id FROM pictures WHERE origin = 'upload' ORDER BY id")]

    def rotation_ids(self) -> list[int]:
        """What the daytime rotation cycles through: the favourites and the uploaded photos, by id."""
        return [r[0] for r in self.query(
            f"SELECT p.id FROM pictures p WHERE p.origin = 'upload' OR {FAVOURITE_SQL} ORDER BY p.id")]

    def set_panel_file(self, picture_id: int, panel_file: str, panel_bytes: int) -> None:
        """Record a panel image prepared after the picture was stored (an upload's first preview)."""
        self.execute("UPDATE pictures SET panel_file = ?, bytes = bytes + ? WHERE id = ? AND panel_file IS NULL",
                     (panel_file, panel_bytes, picture_id))

    def delete_picture(self, picture_id: int, *, remember_rating: bool) -> list[str]:
        """Delete a picture's record and ratings, naming its gallery files in ``gallery_trash`` in the
        same commit (``gallery`` removes them after it, so a power cut leaves named leftovers, never a
        record without its file); returns those names, KeyError for an unknown id.

        ``remember_rating`` (the owner deleted it): a painted picture's latest rating moves to
        ``taste_memory``, so the taste model still learns from it. Retention passes False: it deletes
        only what the owner left unloved, and keeps its old behaviour of forgetting those ratings."""
        with self.transaction() as conn:
            row = conn.execute("SELECT file, panel_file, json_extract(why, '$.plot') FROM pictures WHERE id = ?",
                               (picture_id,)).fetchone()
            if row is None:
                raise KeyError(picture_id)
            names = [name for name in row if name]
            stamp = now_iso()
            if remember_rating:
                conn.execute(
                    "INSERT OR REPLACE INTO taste_memory (picture_id, prompt, theme, style, origin, candidate, "
                    "rating_kind, rating_value, deleted_at) SELECT p.id, p.prompt, p.theme, p.style, p.origin, "
                    "CASE json_type(p.why, '$.candidate') WHEN 'object' THEN json_extract(p.why, '$.candidate') END, "
                    "r.kind, r.value, ? FROM pictures p JOIN ratings r ON r.picture_id = p.id "
                    "WHERE p.id = ? AND p.origin != 'upload' ORDER BY r.id DESC LIMIT 1", (stamp, picture_id))
            conn.execute("UPDATE counters SET value = MAX(value, ?) WHERE name = 'picture_id_floor'", (picture_id,))
            conn.executemany("INSERT OR REPLACE INTO gallery_trash (name, deleted_at) VALUES (?, ?)",
                             [(name, stamp) for name in names])
            conn.execute("DELETE FROM ratings WHERE picture_id = ?", (picture_id,))
            conn.execute("DELETE FROM pictures WHERE id = ?", (picture_id,))
        return names

    def trashed_files(self) -> list[str]:
        """Gallery names of deleted pictures whose files may still be on the card."""
        return [r[0] for r in self.query("SELECT name FROM gallery_trash ORDER BY name")]

    def empty_trash(self, names: list[str]) -> None:
        """Forget trashed names once their files are durably gone."""
        with self.transaction() as conn:
            conn.executemany("DELETE FROM gallery_trash WHERE name = ?", [(name,) for name in names])

    def rating_remembered(self, picture_id: int) -> bool:
        """Whether a deleted picture's rating was kept in ``taste_memory`` (``delete_picture``)."""
        return bool(self.query("SELECT 1 FROM taste_memory WHERE picture_id = ?", (picture_id,)))

    def remembered_ratings(self) -> list[RememberedRating]:
        """Latest ratings of painted pictures the owner deleted, oldest picture first (taste input)."""
        return [RememberedRating.from_row(r) for r in self.query("SELECT * FROM taste_memory ORDER BY picture_id")]

    def rating_history(self) -> list[StoredPicture]:
        """Every rated picture with its latest rating and stored features, oldest first (taste input)."""
        rows = self.query(
            f"{_PICTURE_SELECT} WHERE EXISTS (SELECT 1 FROM ratings r WHERE r.picture_id = p.id) ORDER BY p.id")
        return [_picture_row(r) for r in rows]

    def rated_picture_count(self) -> int:
        """Pictures with at least one rating: how much the taste model has to learn from."""
        return int(self.query("SELECT COUNT(DISTINCT picture_id) FROM ratings")[0][0])

    def rated_painted_prompts(self) -> list[str]:
        """The distinct prompts of rated painted pictures (uploads have none worth choosing from)."""
        rows = self.query("SELECT DISTINCT p.prompt FROM pictures p JOIN ratings r ON r.picture_id = p.id "
                          "WHERE p.origin IS NOT 'upload' ORDER BY p.prompt")
        return [row[0] for row in rows]

    # ratings --------------------------------------------------------------------------------------

    def rate(self, picture_id: int, kind: str, value: int) -> int:
        if kind == "thumb" and value not in (1, -1):
            raise ValueError("a thumb rating is +1 or -1")
        if kind == "stars" and value not in range(1, 6):
            raise ValueError("a star rating is 1 to 5")
        if kind not in ("thumb", "stars"):
            raise ValueError(f"unknown rating kind {kind!r}")
        with self.transaction() as conn:
            if conn.execute("SELECT 1 FROM pictures WHERE id = ?", (picture_id,)).fetchone() is None:
                raise KeyError(picture_id)
            cur = conn.execute(
                "INSERT INTO ratings (picture_id, kind, value, created_at) VALUES (?, ?, ?, ?)",
                (picture_id, kind, value, now_iso()))
            return cur.lastrowid

    # feed items -----------------------------------------------------------------------------------

    def replace_feed_items(self, feed: str, items: list[dict[str, Any]]) -> None:
        """Make ``items`` the feed's current prompts, keeping ``used_at`` of prompts seen before."""
        with self.transaction() as conn:
            used = dict(conn.execute("SELECT prompt, used_at FROM feed_items WHERE feed = ?", (feed,)).fetchall())
            conn.execute("DELETE FROM feed_items WHERE feed = ?", (feed,))
            for item in items:
                conn.execute(
                    "INSERT OR IGNORE INTO feed_items (feed, prompt, negative_prompt, theme, weight, valid_from,"
                    " valid_until, fetched_at, used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (feed, item["prompt"], item.get("negative_prompt", ""), item.get("theme", ""),
                     item.get("weight", 1.0), item.get("valid_from"), item.get("valid_until"), now_iso(),
                     used.get(item["prompt"])))

    def feed_items(self, at: str | None = None) -> list[dict[str, Any]]:
        """Feed prompts valid at ``at`` (ISO UTC, default now), unused first."""
        at = at or now_iso()
        rows = self.query(
            "SELECT * FROM feed_items WHERE (valid_from IS NULL OR valid_from <= ?) AND "
            "(valid_until IS NULL OR valid_until > ?) ORDER BY used_at IS NOT NULL, used_at, id", (at, at))
        return [dict(r) for r in rows]

    def mark_feed_item_used(self, item_id: int) -> None:
        self.execute("UPDATE feed_items SET used_at = ? WHERE id = ?", (now_iso(), item_id))

    def set_feed_health(self, name: str, url: str, ok: bool, items: int, error: str | None,
                        from_cache: bool) -> None:
        stamp = now_iso()
        self.execute(
            "INSERT INTO feed_health (name, url, last_attempt_at, last_ok_at, last_error, items, from_cache)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET url = excluded.url,"
            " last_attempt_at = excluded.last_attempt_at,"
            " last_ok_at = COALESCE(excluded.last_ok_at, feed_health.last_ok_at),"
            " last_error = excluded.last_error, items = excluded.items, from_cache = excluded.from_cache",
            (name, url, stamp, stamp if ok else None, error, items, int(from_cache)))

    def feed_health(self) -> list[FeedHealth]:
        return [FeedHealth.from_row(r) for r in self.query("SELECT * FROM feed_health ORDER BY name")]

    # renders and display history ------------------------------------------------------------------

    def start_render(self, kind: str, night: str | None) -> int:
        return self.execute("INSERT INTO renders (night, kind, status, started_at) VALUES (?, ?, 'running', ?)",
                            (night, kind, now_iso()))

    def finish_render(self, render_id: int, status: str, *, picture_id: int | None = None,
                      error: str | None = None, timings: dict | None = None) -> None:
        self.execute(
            "UPDATE renders SET status = ?, finished_at = ?, picture_id = ?, error = ?, timings = ? WHERE id = ?",
            (status, now_iso(), picture_id, error, json.dumps(timings) if timings else None, render_id))

    def count_restart(self, render_id: int) -> int:
        self.execute("UPDATE renders SET restarts = restarts + 1 WHERE id = ?", (render_id,))
        return self.query("SELECT restarts FROM renders WHERE id = ?", (render_id,))[0][0]

    def render(self, render_id: int) -> RenderRow | None:
        rows = self.query("SELECT * FROM renders WHERE id = ?", (render_id,))
        return RenderRow.from_row(rows[0]) if rows else None

    def renders(self, limit: int = 20) -> list[RenderRow]:
        return [RenderRow.from_row(r) for r in self.query("SELECT * FROM renders ORDER BY id DESC LIMIT ?", (limit,))]

    def unfinished_renders(self) -> list[RenderRow]:
        return [RenderRow.from_row(r) for r in
                self.query("SELECT * FROM renders WHERE status = 'running' ORDER BY id")]

    def night_done(self, night: str) -> bool:
        rows = self.query("SELECT 1 FROM renders WHERE night = ? AND kind = 'night' AND status != 'running'",
                          (night,))
        return bool(rows)

    def night_render_started(self, night: str) -> bool:
        """Whether a night render for ``night`` was started at all (running, done or failed)."""
        return bool(self.query("SELECT 1 FROM renders WHERE night = ? AND kind = 'night'", (night,)))

    def night_picture(self, night: str) -> int | None:
        """The picture of ``night``'s latest finished render that made one (of any kind), else None."""
        rows = self.query("SELECT picture_id FROM renders WHERE night = ? AND status = 'done' AND "
                          "picture_id IS NOT NULL ORDER BY id DESC LIMIT 1", (night,))
        return rows[0][0] if rows else None

    def record_shown(self, picture_id: int, reason: str) -> None:
        self.execute("INSERT INTO shown (picture_id, shown_at, reason) VALUES (?, ?, ?)",
                     (picture_id, now_iso(), reason))

    def last_shown(self) -> ShownEvent | None:
        rows = self.query("SELECT * FROM shown ORDER BY id DESC LIMIT 1")
        return ShownEvent.from_row(rows[0]) if rows else None


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode with WAL, foreign keys and a busy timeout, migrated.

    Raises ``sqlite3.DatabaseError`` for a damaged file (``recovery`` handles that)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS}")
        conn.execute("PRAGMA foreign_keys = ON")
        migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn
