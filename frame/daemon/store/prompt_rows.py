"""The prompt queue's rows: what the owner queued for the coming nights, in order, until painted.

Why apart from ``database``: the queue is the store's one table with an order the owner edits
(position, move, remove, change a waiting prompt's settings) and with rules of its own (a painted
prompt is history: it is no longer waiting and cannot be changed), while ``database`` holds the
connection, its lock and transactions and the other tables. ``Store`` inherits these methods, so
callers keep writing ``store.queue_prompt(...)``; they run on the store's connection through
``transaction``, ``query`` and ``execute``, which ``Store`` defines.
"""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import Any

from frame.daemon.store.records import QueuedPrompt, now_iso

SET_ASIDE_AFTER = 2  # failed renders of one queued prompt before the nights take the next one instead


def _prompt_values(values: dict[str, Any], extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """``values`` restricted to the prompt columns an owner sets; an unknown name is a ValueError."""
    unknown = set(values) - set(QueuedPrompt.EDITABLE) - set(extra)
    if unknown:
        raise ValueError(f"unknown prompt fields: {sorted(unknown)}")
    return dict(values)


class PromptQueueRows:
    """The prompt queue's methods of ``Store`` (see the module docstring)."""

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError  # Store's

    def query(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        raise NotImplementedError  # Store's

    def execute(self, sql: str, params: tuple | dict = ()) -> int:
        raise NotImplementedError  # Store's

    def queue_prompt(self, prompt: str, negative_prompt: str = "", theme: str = "", **settings: Any) -> int:
        """Append a prompt to the queue; ``settings`` are its own ``QueuedPrompt.EDITABLE`` values
        (steps, sampler, guidance, seed, width, height; ``strength`` with ``source_picture_id`` for a
        variation), validated by the caller (``frame.daemon.queue``). Returns its id."""
        values = {"prompt": prompt, "negative_prompt": negative_prompt, "theme": theme,
                  **_prompt_values(settings, extra=("source_picture_id",))}
        values["created_at"] = now_iso()
        columns = ", ".join(values)
        marks = ", ".join(f":{k}" for k in values)
        with self.transaction() as conn:
            values["position"] = conn.execute("SELECT COALESCE(MAX(position), 0) + 1 FROM prompts").fetchone()[0]
            return conn.execute(f"INSERT INTO prompts ({columns}, position) VALUES ({marks}, :position)",
                                values).lastrowid

    def queued_prompts(self) -> list[QueuedPrompt]:
        """The waiting prompts in queue order: the first is the next night's."""
        return [QueuedPrompt.from_row(r) for r in self.query(
            "SELECT * FROM prompts WHERE used_at IS NULL ORDER BY position, id")]

    def queued_prompt(self, prompt_id: int) -> QueuedPrompt | None:
        """A waiting prompt, or None (never queued, removed or already painted)."""
        rows = self.query("SELECT * FROM prompts WHERE id = ? AND used_at IS NULL", (prompt_id,))
        return QueuedPrompt.from_row(rows[0]) if rows else None

    def update_prompt(self, prompt_id: int, **values: Any) -> QueuedPrompt:
        """Change a waiting prompt's ``QueuedPrompt.EDITABLE`` columns (None: back to the default).
        KeyError when it is not waiting: a painted prompt is history."""
        changes = _prompt_values(values)
        with self.transaction() as conn:
            if conn.execute("SELECT 1 FROM prompts WHERE id = ? AND used_at IS NULL", (prompt_id,)).fetchone() is None:
                raise KeyError(prompt_id)
            if changes:  # the owner changed it: a prompt set aside is tried again
                assignments = ", ".join(f"{k} = :{k}" for k in changes)
                conn.execute(f"UPDATE prompts SET {assignments}, failures = 0, set_aside = NULL WHERE id = :id",
                             {**changes, "id": prompt_id})
        prompt = self.queued_prompt(prompt_id)
        assert prompt is not None  # under the lock nothing else ran between
        return prompt

    def remove_prompt(self, prompt_id: int) -> None:
        """Take a waiting prompt out of the queue; KeyError when it is not waiting."""
        with self.transaction() as conn:
            if conn.execute("DELETE FROM prompts WHERE id = ? AND used_at IS NULL", (prompt_id,)).rowcount != 1:
                raise KeyError(prompt_id)

    def move_prompt(self, prompt_id: int, position: int) -> list[QueuedPrompt]:
        """Put a waiting prompt at ``position`` (1 = next night) and renumber the queue; returns it.
        KeyError when it is not waiting, ValueError for a position outside 1..queue length."""
        with self.transaction() as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM prompts WHERE used_at IS NULL ORDER BY position, id")]
            if prompt_id not in ids:
                raise KeyError(prompt_id)
            if isinstance(position, bool) or not isinstance(position, int) or not 1 <= position <= len(ids):
                raise ValueError(f"position must be from 1 to {len(ids)} (the queue's length), got {position!r}")
            ids.remove(prompt_id)
            ids.insert(position - 1, prompt_id)
            conn.executemany("UPDATE prompts SET position = ? WHERE id = ?",
                             [(number, row_id) for number, row_id in enumerate(ids, start=1)])
        return self.queued_prompts()

    def prompt_failed(self, prompt_id: int, reason: str) -> QueuedPrompt | None:
        """Count a failed render of a waiting prompt; at ``SET_ASIDE_AFTER`` it is set aside with
        ``reason``. Returns the prompt as stored (None: it is no longer waiting)."""
        with self.transaction() as conn:
            conn.execute("UPDATE prompts SET failures = failures + 1, set_aside = CASE WHEN failures + 1 >= ? "
                         "THEN ? ELSE set_aside END WHERE id = ? AND used_at IS NULL",
                         (SET_ASIDE_AFTER, reason, prompt_id))
        return self.queued_prompt(prompt_id)

    def mark_prompt_used(self, prompt_id: int, picture_id: int) -> None:
        self.execute("UPDATE prompts SET used_at = ?, picture_id = ? WHERE id = ?",
                     (now_iso(), picture_id, prompt_id))
