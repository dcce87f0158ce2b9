"""Refresh guard: unchanged pictures are skipped, refreshes respect the minimum interval."""

from __future__ import annotations

import json

from frame.display.care import TOO_SOON, UNCHANGED, RefreshGuard


class Now:
    def __init__(self) -> None:
        self.t = 10_000.0

    def __call__(self) -> float:
        return self.t


def test_unchanged_picture_is_skipped_and_interval_is_enforced(tmp_path) -> None:
    now = Now()
    path = tmp_path / "display" / "care.json"
    guard = RefreshGuard(path, "waveshare-7in3e", 180, now=now)
    assert guard.check("a") is None
    guard.record("a")
    assert guard.check("a").status == UNCHANGED
    now.t += 60
    blocked = guard.check("b")
    assert blocked.status == TOO_SOON and blocked.retry_at == 10_180.0
    assert "retry in 120 s" in blocked.message
    now.t += 120
    assert guard.check("b") is None


def test_state_survives_a_restart_and_is_per_panel(tmp_path) -> None:
    now = Now()
    path = tmp_path / "care.json"
    RefreshGuard(path, "waveshare-7in3e", 180, now=now).record("a")
    assert json.loads(path.read_text())["waveshare-7in3e"]["digest"] == "a"
    assert RefreshGuard(path, "waveshare-7in3e", 180, now=now).check("a").status == UNCHANGED
    assert RefreshGuard(path, "virtual", 0, now=now).check("a") is None


def test_force_skips_only_the_unchanged_check(tmp_path) -> None:
    now = Now()
    guard = RefreshGuard(tmp_path / "care.json", "p", 180, now=now)
    guard.record("a")
    assert guard.check("a", force=True).status == TOO_SOON
    now.t += 200
    assert guard.check("a", force=True) is None


def test_forget_after_a_failed_refresh_and_corrupt_state_is_ignored(tmp_path) -> None:
    now = Now()
    path = tmp_path / "care.json"
    guard = RefreshGuard(path, "p", 0, now=now)
    guard.record("a")
    guard.forget()
    assert guard.check("a") is None
    path.write_text("{not json")
    assert RefreshGuard(path, "p", 0, now=now).check("a") is None


def test_without_a_state_dir_the_guard_remembers_in_memory() -> None:
    now = Now()
    guard = RefreshGuard(None, "p", 0, now=now)
    guard.record("a")
    assert guard.check("a").status == UNCHANGED
