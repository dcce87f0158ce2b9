"""The store's schema as an ordered list of migrations, applied by ``PRAGMA user_version``.

Each entry turns version N into N+1 and runs inside one transaction, so a power cut mid-upgrade leaves
the old version intact. Never edit a released migration: append a new one.
"""

from __future__ import annotations

import logging
import sqlite3

from frame.errors import FrameError

log = logging.getLogger(__name__)

_V1 = """
CREATE TABLE pictures (
    id INTEGER PRIMARY KEY,
    created_at TEXT NOT NULL,
    night TEXT,
    file TEXT NOT NULL,
    panel_file TEXT,
    bytes INTEGER NOT NULL DEFAULT 0,
    prompt TEXT NOT NULL,
    negative_prompt TEXT NOT NULL DEFAULT '',
    theme TEXT NOT NULL DEFAULT '',
    style TEXT NOT NULL DEFAULT '',
    origin TEXT NOT NULL DEFAULT '',
    seed INTEGER,
    sampler TEXT,
    steps INTEGER,
    guidance REAL,
    width INTEGER,
    height INTEGER,
    model TEXT,
    features TEXT,
    why TEXT,
    timings TEXT
);
CREATE TABLE ratings (
    id INTEGER PRIMARY KEY,
    picture_id INTEGER NOT NULL REFERENCES pictures(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('thumb', 'stars')),
    value INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX ratings_picture ON ratings(picture_id, id);
CREATE TABLE prompts (
    id INTEGER PRIMARY KEY,
    prompt TEXT NOT NULL,
    negative_prompt TEXT NOT NULL DEFAULT '',
    theme TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    used_at TEXT,
    picture_id INTEGER
);
CREATE TABLE feed_items (
    id INTEGER PRIMARY KEY,
    feed TEXT NOT NULL,
    prompt TEXT NOT NULL,
    negative_prompt TEXT NOT NULL DEFAULT '',
    theme TEXT NOT NULL DEFAULT '',
    weight REAL NOT NULL DEFAULT 1.0,
    valid_from TEXT,
    valid_until TEXT,
    fetched_at TEXT NOT NULL,
    used_at TEXT,
    UNIQUE (feed, prompt)
);
CREATE TABLE renders (
    id INTEGER PRIMARY KEY,
    night TEXT,
    kind TEXT NOT NULL CHECK (kind IN ('night', 'now')),
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'missed')),
    started_at TEXT NOT NULL,
    finished_at TEXT,
    restarts INTEGER NOT NULL DEFAULT 0,
    picture_id INTEGER,
    error TEXT,
    timings TEXT
);
CREATE INDEX renders_night ON renders(night);
"""

_V2 = """
CREATE TABLE shown (
    id INTEGER PRIMARY KEY,
    picture_id INTEGER NOT NULL,
    shown_at TEXT NOT NULL,
    reason TEXT NOT NULL
);
CREATE TABLE feed_health (
    name TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    last_attempt_at TEXT,
    last_ok_at TEXT,
    last_error TEXT,
    items INTEGER NOT NULL DEFAULT 0,
    from_cache INTEGER NOT NULL DEFAULT 0
);
"""

# The owner's queue: an order of its own (``position``, so a prompt can be moved), the
# per-prompt settings (NULL: the night's settings; ``seed`` NULL: a random seed) and, for "more like
# this", the gallery picture a variation starts from and its img2img strength.
_V3 = """
ALTER TABLE prompts ADD COLUMN position INTEGER;
UPDATE prompts SET position = id;
ALTER TABLE prompts ADD COLUMN steps INTEGER;
ALTER TABLE prompts ADD COLUMN sampler TEXT;
ALTER TABLE prompts ADD COLUMN guidance REAL;
ALTER TABLE prompts ADD COLUMN seed INTEGER;
ALTER TABLE prompts ADD COLUMN width INTEGER;
ALTER TABLE prompts ADD COLUMN height INTEGER;
ALTER TABLE prompts ADD COLUMN source_picture_id INTEGER;
ALTER TABLE prompts ADD COLUMN strength REAL;
CREATE INDEX prompts_waiting ON prompts(used_at, position)
"""

# Deleting from the phone: ``gallery_trash`` names the files of deleted pictures, written in the
# transaction that deletes the record, so files a power cut left behind are found again by name (an
# upload's name carries no render id to find it by); ``taste_memory`` keeps what the taste model
# learns from a painted picture's latest rating after the owner deleted the picture. ``counters``
# holds ``picture_id_floor``, the highest picture id ever used or referenced: new pictures get ids above
# it, so deleting the newest picture never hands its id (cached images, a queued variation, the display
# history) to the next one.
_V4 = """
CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO counters (name, value) SELECT 'picture_id_floor', MAX(
    COALESCE((SELECT MAX(id) FROM pictures), 0), COALESCE((SELECT MAX(picture_id) FROM renders), 0),
    COALESCE((SELECT MAX(picture_id) FROM shown), 0), COALESCE((SELECT MAX(source_picture_id) FROM prompts), 0));
CREATE TABLE gallery_trash (
    name TEXT PRIMARY KEY,
    deleted_at TEXT NOT NULL
);
CREATE TABLE taste_memory (
    picture_id INTEGER PRIMARY KEY,
    prompt TEXT NOT NULL,
    theme TEXT NOT NULL DEFAULT '',
    style TEXT NOT NULL DEFAULT '',
    origin TEXT NOT NULL DEFAULT '',
    candidate TEXT,
    rating_kind TEXT NOT NULL CHECK (rating_kind IN ('thumb', 'stars')),
    rating_value INTEGER NOT NULL,
    deleted_at TEXT NOT NULL
)
"""

# A queued prompt that cannot be painted: ``failures`` counts its renders that failed
# painting it, and at ``SET_ASIDE_AFTER`` (frame.daemon.store.prompt_rows) ``set_aside`` keeps why; the
# night then takes the next prompt instead of failing the same way every night. An edit clears both.
_V5 = """
ALTER TABLE prompts ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE prompts ADD COLUMN set_aside TEXT
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database to ``SCHEMA_VERSION``; return the version it had before.

    A database written by a newer frame is refused rather than guessed at.
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise FrameError(
            f"the database has schema version {version} but this frame only knows up to "
            f"{SCHEMA_VERSION}; upgrade frame or move the database away")
    for number in range(version, SCHEMA_VERSION):
        log.info("migrating store schema %d -> %d", number, number + 1)
        statements = [s.strip() for s in MIGRATIONS[number].split(";") if s.strip()]
        with conn:
            conn.execute("BEGIN")
            for statement in statements:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number + 1}")
    return version
