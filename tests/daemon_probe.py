"""Run as ``python tests/daemon_probe.py STATE_DIR PHOTO``: builds the daemon's real app the way
``frame run`` does (``create_app`` with ``frame.web.create_blueprint``), logs in as the owner, serves
the pages that used to pull in heavy modules (gallery, picture, thumbnail, settings page and a
settings save, photo upload) and prints, as JSON, which forbidden modules are then in ``sys.modules``.

A script, not an import: pytest's own process has numpy and Pillow loaded, so only a fresh interpreter
can tell what the daemon imports (``tests/test_layers.py``, the third rule's runtime half).
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

FORBIDDEN = ("numpy", "onnx", "PIL", "pillow_heif", "sklearn", "scipy", "matplotlib", "onnxruntime")
TOKEN = "owner-token-for-the-probe-42"
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def serve_pages(state_dir: Path, photo: Path) -> list[str]:
    """Each page's path and status, after which ``sys.modules`` is inspected."""
    import frame.cli.daemon  # noqa: F401 - what ``frame run`` imports before the app exists
    from frame.config import Config, WebConfig
    from frame.daemon.http.app import create_app
    from frame.daemon.store.database import Store
    from frame.web import create_blueprint

    store = Store.open(state_dir)
    picture = store.add_picture(file="probe.png", prompt="a probe", theme="probe", style="plain", seed=1)
    config = Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN))
    app = create_app(config, store, token=TOKEN, controller=None, state_dir=state_dir, pages=create_blueprint)
    client = app.test_client()
    token = CSRF.search(client.get("/login").get_data(as_text=True)).group(1)
    client.post("/login", data={"token": TOKEN, "csrf_token": token, "next": "/"})
    seen = []
    for path in ("/", "/gallery", f"/pictures/{picture}", f"/pictures/{picture}/thumb", "/config", "/upload"):
        seen.append(f"GET {path} {client.get(path).status_code}")
    token = CSRF.search(client.get("/config").get_data(as_text=True)).group(1)
    answer = client.post("/config", data={"csrf_token": token, "schedule.render_at": "02:30",
                                          "feeds.sources-0-url": ""})
    seen.append(f"POST /config {answer.status_code}")
    answer = client.post("/upload", data={"csrf_token": token, "caption": "probe",
                                          "photo": (io.BytesIO(photo.read_bytes()), "probe.jpg")},
                         content_type="multipart/form-data")
    seen.append(f"POST /upload {answer.status_code}")
    store.close()
    return seen


def main() -> int:
    seen = serve_pages(Path(sys.argv[1]), Path(sys.argv[2]))
    print(json.dumps({"pages": seen, "forbidden": sorted(m for m in FORBIDDEN if m in sys.modules)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
