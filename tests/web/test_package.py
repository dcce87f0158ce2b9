"""Packaging facts the daemon relies on: a cheap import, the entry point, shipped templates and assets."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import frame.web

WEB = Path(frame.web.__file__).parent


def test_import_is_cheap():
    code = ("import sys, frame.web, frame.buttons.dispatch\n"
            "heavy = [m for m in ('flask', 'jinja2', 'werkzeug', 'PIL', 'gpiozero') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


def test_templates_and_static_assets_are_local():
    names = {p.name for p in (WEB / "templates").glob("*.html")}
    assert {"base.html", "picture.html", "gallery.html", "queue.html", "status.html", "config.html",
            "login.html", "error.html"} <= names
    assert (WEB / "static" / "frame.css").is_file() and (WEB / "static" / "frame.js").is_file()
    for path in [*(WEB / "templates").glob("*.html"), *(WEB / "static").iterdir()]:
        if path.suffix == ".ico":  # the favicon: an image, nothing it could load
            continue
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(src|href)=\"(https?:)?//", text), f"{path.name} loads an internet asset"
        assert "@import" not in text and "url(http" not in text, path.name


def test_every_form_carries_a_csrf_field():
    for path in (WEB / "templates").glob("*.html"):
        text = path.read_text(encoding="utf-8")
        forms = re.findall(r"<form\b.*?</form>", text, flags=re.S)
        for form in forms:
            if 'method="post"' in form:
                assert "csrf_token()" in form, f"a POST form in {path.name} lacks the CSRF field"


def test_served_by_the_daemons_waitress_server(store, state_dir, pictures):
    """The blueprint inside the daemon's own HttpServer: the page, a static file and an image over HTTP."""
    import requests

    from frame.config import Config, WebConfig
    from frame.daemon.http.app import create_app
    from frame.net.server import HttpServer
    from frame.web import create_blueprint
    from tests.web.conftest import TOKEN

    config = Config(state_dir=str(state_dir), web=WebConfig(listen="127.0.0.1:0", token=TOKEN))
    server = HttpServer(create_app(config, store, token=TOKEN, state_dir=state_dir, pages=create_blueprint),
                        config.web.listen)
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        owner = {"Authorization": f"Bearer {TOKEN}"}
        page = requests.get(base + "/", headers=owner, timeout=5)
        assert page.status_code == 200 and "a quiet harbour at dawn" in page.text
        assert requests.get(base + "/", timeout=5, allow_redirects=False).status_code == 303  # the login page
        assert requests.get(base + "/web-static/frame.css", timeout=5).headers["Content-Type"].startswith("text/css")
        thumb = requests.get(f"{base}/pictures/{pictures['new']}/thumb", headers=owner, timeout=5)
        assert thumb.headers["Content-Type"] == "image/jpeg"
        assert requests.get(base + "/api/status", headers=owner, timeout=5).json()["queued_prompts"] == 0
    finally:
        server.close()
