"""The Pi twin's phone: an owner on the phone page and the JSON API while a night renders.

Used by tools/pi_twin.py (against the emulated daemon) and tools/build_pi_twin_reference.py (against a
native one, to record the x86 picture). Standard library only (urllib), so it runs anywhere.

What the owner does, in order, all over HTTP on 127.0.0.1:
  1. page loads (now, gallery, queue, settings, status, upload form) before logging in (each is sent
     to the login page: nothing is shown without the owner) and after;
  2. logs in on the phone page with the owner token (session cookie, CSRF token from the form);
  3. queues tonight's prompt with a fixed seed (``POST /api/prompts``), then edits it
     (``PATCH /api/prompts/ID``): the night paints exactly that prompt and seed, so its picture can be
     compared with the x86 reference;
  4. saves settings that schedule the night a minute ahead (``PUT /api/settings``: render_at,
     show_at, deadline): the night itself starts from the daemon's scheduler, not from render-now;
  5. mid-render (once the worker reports a step): uploads a photo on the phone page and rates it,
     and keeps loading pages until the night's picture is on the panel.
"""

from __future__ import annotations

import datetime as dt
import http.cookiejar
import json
import re
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
PAGES = ("/", "/gallery", "/queue", "/config", "/status", "/upload")
PROMPT = "a lighthouse on a cliff at dawn, oil painting"
EDITED_PROMPT = "a lighthouse on a cliff at dusk, oil painting"
SEED = 20261203
STEPS = 8
SIZE = "256x160"


def night_config(config: dict[str, Any], port: int, size: str = SIZE) -> dict[str, Any]:
    """The owner's config.yaml for the twin's night: the bundled demo model (SD 1.5's architecture,
    small) at ``size``, the virtual panel, UTC, the phone page on 127.0.0.1:``port``, and a night far
    ahead (the phone's settings save brings it to the next minute)."""
    config = {**config}
    config["model"] = {**(config.get("model") or {}), "source": "demo", "size": size}
    config["display"] = {**(config.get("display") or {}), "panel": "virtual"}
    config["schedule"] = {**(config.get("schedule") or {}), "timezone": "UTC", "render_at": "00:00",
                          "deadline": "00:01", "show_at": "00:01", "quiet_hours": "", "rotate_favourites_minutes": 0}
    config["web"] = {**(config.get("web") or {}), "listen": f"127.0.0.1:{port}"}
    return config


class PhoneError(RuntimeError):
    """The daemon answered the phone wrongly (status, missing field) or not within the time allowed."""


@dataclass
class NightReport:
    picture_id: int
    picture_png: bytes
    render_seconds: float
    night_seconds: float
    page_loads: int
    actions: list[str] = field(default_factory=list)


def schedule_fields(now: dt.datetime, lead_seconds: int = 45) -> dict[str, str]:
    """render_at: the first whole minute at least ``lead_seconds`` ahead (UTC); show_at a minute
    after it (the picture goes up when done); deadline two hours after it (long emulated nights)."""
    start = (now + dt.timedelta(seconds=lead_seconds + 59)).replace(second=0, microsecond=0)
    return {"schedule.render_at": start.strftime("%H:%M"),
            "schedule.show_at": (start + dt.timedelta(minutes=1)).strftime("%H:%M"),
            "schedule.deadline": (start + dt.timedelta(hours=2)).strftime("%H:%M")}


def multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes, str]]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    for name, (filename, data, mime) in files.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                     f"Content-Type: {mime}\r\n\r\n".encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


class Phone:
    """One owner's phone: a cookie jar for the page's session, the token for the API."""

    def __init__(self, base: str, token: str, timeout: float = 60.0) -> None:
        self.base, self.token, self.timeout = base.rstrip("/"), token, timeout
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.page_loads = 0

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                expect: tuple[int, ...] = (200,)) -> tuple[int, bytes]:
        req = urllib.request.Request(self.base + path, data=body, method=method, headers=headers or {})
        try:
            with self.opener.open(req, timeout=self.timeout) as answer:
                status, data = answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            status, data = exc.code, exc.read()
        if status not in expect:
            raise PhoneError(f"{method} {path}: HTTP {status} (wanted {expect}): {data[:300]!r}")
        return status, data

    def page(self, path: str) -> str:
        self.page_loads += 1
        return self.request("GET", path)[1].decode()

    def api(self, method: str, path: str, body: dict[str, Any] | None = None, expect: tuple[int, ...] = (200,)) -> Any:
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        data = None if body is None else json.dumps(body).encode()
        return json.loads(self.request(method, path, data, headers, expect)[1] or b"null")

    def csrf(self, path: str) -> str:
        found = CSRF.search(self.page(path))
        if not found:
            raise PhoneError(f"no CSRF token in the form on {path}")
        return found.group(1)

    def form(self, path: str, fields: dict[str, str], files: dict[str, tuple[str, bytes, str]] | None = None,
             expect: tuple[int, ...] = (200, 303)) -> int:
        body, kind = multipart(fields, files or {})
        return self.request("POST", path, body, {"Content-Type": kind}, expect)[0]

    def status(self) -> dict[str, Any]:
        return self.api("GET", "/api/status")

    def wait_up(self, seconds: float) -> None:
        """Until the daemon answers its login page: the one page anyone may have. Asking the API before
        the token is known would send wrong tokens, and the daemon's limiter then locks this address out."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                self.request("GET", "/login")
                return
            except (OSError, PhoneError):
                time.sleep(1)
        raise PhoneError(f"the daemon's API did not answer within {seconds:.0f} s")

    def login(self) -> None:
        csrf = self.csrf("/login")
        self.form("/login", {"token": self.token, "csrf_token": csrf, "next": "/"})
        if "logout" not in self.page("/").lower():
            raise PhoneError("logging in with the owner token gave no owner session")


def until(what: str, predicate: Callable[[], Any], seconds: float, tick: Callable[[], None], every: float = 2.0) -> Any:
    """Call ``tick`` and ``predicate`` every ``every`` seconds until ``predicate`` is truthy; bounded."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        tick()
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise PhoneError(f"{what}: not within {seconds:.0f} s")


def drive_night(phone: Phone, photo: bytes, *, night_seconds: float, tick: Callable[[], None] = lambda: None,
                now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> NightReport:
    """Steps 1-5 above; returns the night's picture (PNG bytes) once it is shown on the panel."""
    actions = []
    for path in PAGES:
        phone.page(path)
    phone.login()
    for path in PAGES:
        phone.page(path)
    queued = phone.api("POST", "/api/prompts", {"prompt": PROMPT, "seed": SEED, "steps": STEPS}, expect=(201,))
    phone.api("PATCH", f"/api/prompts/{queued['id']}", {"prompt": EDITED_PROMPT})
    actions.append(f"queued prompt {queued['id']} and edited it")
    fields = schedule_fields(now())
    saved = phone.api("PUT", "/api/settings", fields)
    if sorted(saved.get("changed", fields)) != sorted(fields):
        raise PhoneError(f"the settings save changed {saved.get('changed')}, not {sorted(fields)}")
    actions.append("settings saved: " + ", ".join(f"{k.split('.')[1]} {v}" for k, v in fields.items()))
    phone.page("/config")

    started = time.monotonic()

    def rendering_step() -> bool:
        render = phone.status().get("render") or {}
        return phone.status().get("state") == "rendering" and (render.get("step") or 0) >= 1

    until("the night's render reaching its first step", rendering_step, night_seconds, tick)
    render_started = time.monotonic()
    csrf = phone.csrf("/upload")
    phone.form("/upload", {"csrf_token": csrf, "caption": "Pi twin upload"},
               {"photo": ("garden.jpg", photo, "image/jpeg")})
    photo_id = next(p["id"] for p in phone.api("GET", "/api/pictures?limit=5")["pictures"] if p["origin"] == "upload")
    page = phone.page(f"/pictures/{photo_id}")
    token = CSRF.search(page)
    if not token:
        raise PhoneError(f"no rating form on /pictures/{photo_id}")
    phone.form(f"/pictures/{photo_id}/rate", {"rating": "4", "csrf_token": token.group(1), "next": "/"})
    actions.append(f"uploaded photo {photo_id} mid-render (step >= 1) and rated it 4 stars")

    def tick_and_browse() -> None:
        tick()
        phone.page(PAGES[int(time.monotonic()) % len(PAGES)])

    def painted() -> dict[str, Any] | None:
        for picture in phone.api("GET", "/api/pictures?limit=10")["pictures"]:
            if picture["prompt"] == EDITED_PROMPT and picture["seed"] == SEED:
                return picture
        return None

    picture = until("the night's picture", painted, night_seconds, tick_and_browse, every=3.0)
    render_seconds = time.monotonic() - render_started

    def shown() -> bool:
        return (phone.status().get("shown") or {}).get("picture_id") == picture["id"]

    until("the night's picture on the panel", shown, 300, tick_and_browse, every=3.0)
    png = phone.request("GET", f"/api/pictures/{picture['id']}/image")[1]
    return NightReport(picture["id"], png, render_seconds, time.monotonic() - started, phone.page_loads, actions)
