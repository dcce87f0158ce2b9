"""Logging out ends the session on the server: copied cookies stop working; "log out everywhere"."""

from __future__ import annotations

import stat

from frame.web.blueprint import SESSION_COOKIE
from frame.web.sessions import MAX_SESSIONS, SESSIONS_FILE, SessionRegistry
from tests.web.conftest import csrf_from, login, make_app


def _copy_cookie(source, target) -> None:
    target.set_cookie(SESSION_COOKIE, source.get_cookie(SESSION_COOKIE).value)


def _csrf(client) -> str:
    return csrf_from(client.get("/").get_data(as_text=True))


def _can_queue(client, prompt: str, csrf: str | None = None) -> bool:
    """Queue a prompt like the form does; ``csrf``: a form token kept from when the session worked
    (the cookie still carries it after a logout)."""
    response = client.post("/queue", data={"prompt": prompt, "csrf_token": csrf or _csrf(client)})
    return response.status_code == 303


def _logged_out(client) -> bool:
    """Every page sends a visitor who is not logged in to the login page."""
    response = client.get("/")
    return response.status_code == 303 and response.headers["Location"].startswith("/login")


def test_logout_revokes_every_copy_of_the_cookie(app, store):
    phone, thief = app.test_client(), app.test_client()
    assert login(phone).status_code == 303
    _copy_cookie(phone, thief)
    csrf = _csrf(thief)
    assert _can_queue(thief, "copied cookie works while the owner is logged in", csrf)
    assert phone.post("/logout", data={"csrf_token": _csrf(phone)}).status_code == 303
    assert not _can_queue(thief, "must not be stored", csrf)
    assert _logged_out(thief)
    assert [p.prompt for p in store.queued_prompts()] == ["copied cookie works while the owner is logged in"]


def test_log_out_everywhere_from_the_settings_page(app, store):
    phone, laptop = app.test_client(), app.test_client()
    login(phone)
    login(laptop)
    csrf = _csrf(phone)
    settings = laptop.get("/config").get_data(as_text=True)
    assert "Log out everywhere" in settings
    response = laptop.post("/logout-everywhere", data={"csrf_token": csrf_from(settings), "confirm": "yes"},
                           follow_redirects=True)
    assert "Logged out everywhere: 2 sessions ended." in response.get_data(as_text=True)
    assert not _can_queue(phone, "x", csrf)
    assert _logged_out(laptop)
    assert store.queued_prompts() == []
    login(phone)
    assert _can_queue(phone, "after logging in again")


def test_sessions_survive_a_restart_but_not_a_logout(store, state_dir, pictures, controller):
    first = make_app(store, state_dir, controller)
    phone = first.test_client()
    login(phone)
    restarted = make_app(store, state_dir, controller).test_client()
    _copy_cookie(phone, restarted)
    assert _can_queue(restarted, "after a restart")
    path = state_dir / SESSIONS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert phone.get_cookie(SESSION_COOKIE).value not in path.read_text()  # digests only


def test_registry_expires_idle_sessions_and_stays_bounded(tmp_path):
    now = [1_000_000.0]
    registry = SessionRegistry(tmp_path / SESSIONS_FILE, clock=lambda: now[0])
    kept = registry.create()
    now[0] += 89 * 86400
    assert registry.valid(kept)  # used: the 90 days start again
    idle = registry.create()
    now[0] += 91 * 86400
    assert not registry.valid(kept) and not registry.valid(idle)
    ids = [registry.create() for _ in range(MAX_SESSIONS + 5)]
    assert len(registry) == MAX_SESSIONS and not registry.valid(ids[0]) and registry.valid(ids[-1])
    assert not registry.valid(None) and not registry.valid("") and not registry.valid(12)


def test_damaged_registry_file_logs_everyone_out_and_keeps_working(tmp_path):
    path = tmp_path / SESSIONS_FILE
    path.write_bytes(b"\x00garbage")
    registry = SessionRegistry(path)
    assert len(registry) == 0
    assert registry.valid(registry.create())


def _disk_full(monkeypatch) -> None:
    """Every write of the sessions list fails as on a full SD card (the temporary file is not made)."""
    import errno

    from frame.web import sessions

    def full(path, data, mode=0o644):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sessions, "write_json", full)


def test_a_logout_on_a_full_disk_still_holds_after_a_restart(store, state_dir, pictures, controller, monkeypatch):
    """The logout answered 303 but the list on disk still named the session, so after a restart the old
    cookie (or a copy of it) worked again. Now the revocation holds and the owner is told."""
    first = make_app(store, state_dir, controller)
    phone, other = first.test_client(), first.test_client()
    login(phone)
    login(other)
    cookie = phone.get_cookie(SESSION_COOKIE).value
    _disk_full(monkeypatch)
    response = phone.post("/logout", data={"csrf_token": _csrf(phone)})
    page = response.get_data(as_text=True)
    assert response.status_code == 507 and "storage is full" in page and "log in again" in page
    assert _logged_out(phone)  # logged out at once
    monkeypatch.undo()
    restarted = make_app(store, state_dir, controller).test_client()
    restarted.set_cookie(SESSION_COOKIE, cookie)
    assert not _can_queue(restarted, "the revoked cookie after a restart", _csrf(other))
    assert store.queued_prompts() == []


def test_log_out_everywhere_on_a_full_disk_holds_after_a_restart(store, state_dir, pictures, controller, monkeypatch):
    first = make_app(store, state_dir, controller)
    phone = first.test_client()
    login(phone)
    cookie, csrf = phone.get_cookie(SESSION_COOKIE).value, _csrf(phone)
    _disk_full(monkeypatch)
    response = phone.post("/logout-everywhere", data={"csrf_token": csrf, "confirm": "yes"})
    assert response.status_code == 507 and "storage is full" in response.get_data(as_text=True)
    monkeypatch.undo()
    restarted = make_app(store, state_dir, controller).test_client()
    restarted.set_cookie(SESSION_COOKIE, cookie)
    assert not _can_queue(restarted, "x", csrf)


def test_registry_says_when_a_logout_could_not_be_kept(tmp_path, monkeypatch):
    from pathlib import Path

    from frame.web.sessions import FORGOT_ALL, SAVED, UNSAVED

    registry = SessionRegistry(tmp_path / SESSIONS_FILE)
    kept, gone, last = registry.create(), registry.create(), registry.create()
    assert registry.revoke(kept) == SAVED  # a normal logout is written
    _disk_full(monkeypatch)
    assert registry.revoke(gone) == FORGOT_ALL and not (tmp_path / SESSIONS_FILE).exists()
    (tmp_path / SESSIONS_FILE).write_text("{}")
    monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: (_ for _ in ()).throw(PermissionError(13, "no")))
    assert registry.revoke(last) == UNSAVED
    assert not registry.valid(gone) and not registry.valid(last)


def test_after_a_failed_save_the_list_is_written_again_later_not_on_every_request(tmp_path, monkeypatch):
    """The logout that removed the file is made to last once there is room again: the remaining
    sessions reach the disk at the next try (every 10 minutes), not on every request meanwhile."""
    from frame.web import sessions

    now = [1_000_000.0]
    registry = SessionRegistry(tmp_path / SESSIONS_FILE, clock=lambda: now[0])
    gone, kept = registry.create(), registry.create()
    writes = []
    real = sessions.write_json
    _disk_full(monkeypatch)
    full = sessions.write_json
    monkeypatch.setattr(sessions, "write_json", lambda *a, **k: writes.append(1) or full(*a, **k))
    registry.revoke(gone)
    for _ in range(20):
        assert registry.valid(kept)
    assert len(writes) == 1  # the logout's try only
    monkeypatch.setattr(sessions, "write_json", real)  # room again
    now[0] += sessions.SAVE_RETRY_SECONDS + 1
    assert registry.valid(kept)
    restarted = SessionRegistry(tmp_path / SESSIONS_FILE, clock=lambda: now[0])
    assert restarted.valid(kept) and not restarted.valid(gone)
