"""The phone's "import from a URL" (issue 41 item 6): ``frame model import`` in a child the daemon
watches (``frame.daemon.jobs.model_import``), from a real HTTP server on 127.0.0.1 serving a diffusers
folder made from the tiny SD 1.5 fixture checkpoint: end to end, refused during a render, paused by a
render that starts and going on after it, and resumed by the next daemon start after the child was
killed mid-import (a power cut)."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("numpy")  # the fixture folder is written with numpy (the child itself needs numpy and onnx)

from frame.daemon.jobs.model_import import (  # noqa: E402
    LOG_FILE,
    STATE_FILE,
    ImportRefused,
    ModelImports,
    check_url,
    default_name,
)
from frame.daemon.models_folder import list_models  # noqa: E402
from frame.statefile import read_json  # noqa: E402
from tests.convert.checkpoint.helpers import FIXTURES, write_safetensors  # noqa: E402
from tests.engine.http_server import RangeServer  # noqa: E402

FILES = {"unet": "diffusion_pytorch_model", "vae": "diffusion_pytorch_model", "text_encoder": "model"}
CAP_MB = 1024


def diffusers_folder(root: Path) -> Path:
    """The SD 1.5 fixture as a diffusers folder with safetensors weights (its configs beside them, so
    the URL import needs no --config-from)."""
    from frame.convert.checkpoint.plan import detect
    from frame.convert.checkpoint.reader import open_checkpoint

    checkpoint = open_checkpoint(str(FIXTURES / "sd15.safetensors"))
    found = detect(checkpoint)
    folder = root / "sd15"
    shutil.copytree(FIXTURES / "sd15", folder, ignore=shutil.ignore_patterns("expected.json", "reference.npz"))
    for component in found.components:
        write_safetensors(folder / component.name / f"{FILES[component.name]}.safetensors", dict(component.weights()))
    checkpoint.close()
    return folder


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    diffusers_folder(root)
    server = RangeServer(str(root)).start()
    yield server
    server.stop()


def wait_for(condition, seconds: float = 120.0, what: str = "") -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_url_checks():
    for bad in ("", "ftp://nas/x.safetensors", "file:///etc/passwd", "/home/pi/x.safetensors", "http://",
                "https://nas/a b.safetensors", "javascript:alert(1)", 5, None, "http://" + "a" * 3000):
        with pytest.raises(ImportRefused) as refused:
            check_url(bad)
        assert refused.value.field == "url"
    assert check_url(" https://nas.local/sd/x.safetensors ") == "https://nas.local/sd/x.safetensors"
    assert default_name("https://u:p@nas/sd/Dream Shaper 8.safetensors?token=1") == "Dream-Shaper-8"
    assert default_name("https://nas/sd/") == "sd" and default_name("https://nas/") == "imported-model"


def test_import_end_to_end_from_a_local_server(served, tmp_path):
    imports = ModelImports(tmp_path, lambda: False, poll_seconds=0.1)
    name = imports.start(served.url("sd15/"), "", "fp16", CAP_MB)
    assert name == "sd15"
    assert imports.state()["status"] == "running"
    assert imports.wait(180)
    state = imports.state()
    assert state["status"] == "done", state
    model = tmp_path / "models" / "sd15"
    assert (model / "unet" / "model.onnx").is_file() and (model / "vae_decoder" / "model.onnx").is_file()
    assert not (tmp_path / "models" / ".sd15.import").exists()
    entry = next(e for e in list_models(tmp_path, "demo") if e.name == "sd15")
    assert (entry.kind, entry.precision) == ("SD 1.x", "fp16")
    assert "converting" in (tmp_path / LOG_FILE).read_text()
    for private in (STATE_FILE, LOG_FILE):  # the URL may carry credentials
        assert (tmp_path / private).stat().st_mode & 0o077 == 0, private
    with pytest.raises(ImportRefused, match="already exists") as refused:
        imports.start(served.url("sd15/"), "sd15", "fp16", CAP_MB)
    assert refused.value.field == "name"


def test_a_failure_is_one_line_with_the_credentials_hidden(served, tmp_path):
    imports = ModelImports(tmp_path, lambda: False, poll_seconds=0.1)
    url = served.url("nothing.safetensors").replace("http://", "http://bob:hunter2@") + "?token=s3cret"
    imports.start(url, "x", "fp16", CAP_MB)
    assert imports.wait(120)
    state = imports.state()
    assert state["status"] == "failed" and "404" in state["error"], state
    shown = json.dumps(state)
    assert "hunter2" not in shown and "s3cret" not in shown
    assert not (tmp_path / "models" / "x").exists()


def test_refused_during_a_render_and_one_at_a_time(served, tmp_path):
    rendering = threading.Event()
    rendering.set()
    imports = ModelImports(tmp_path, rendering.is_set, poll_seconds=0.1)
    with pytest.raises(ImportRefused, match="not while a render is running") as refused:
        imports.start(served.url("sd15/"), "", "fp16", CAP_MB)
    assert refused.value.field == "" and imports.state() is None
    rendering.clear()
    imports.start(served.url("sd15/"), "", "uint8", CAP_MB)
    with pytest.raises(ImportRefused, match="already running"):
        imports.start(served.url("sd15/"), "other", "fp16", CAP_MB)
    assert imports.wait(180) and imports.state()["status"] == "done"


def hold_vae(server: RangeServer, aside: Path) -> threading.Event:
    """Once the UNet (the first graph) is complete in ``aside``, the VAE's weights hang (the importer
    retries) until the returned event is set: the import is caught between two graphs."""
    release = threading.Event()
    server.hang_seconds = 0.2

    def gate(path: str) -> str | None:
        held = not release.is_set() and "/vae/" in path and (aside / "unet" / "model.onnx").is_file()
        return "hang" if held else None

    server.gate = gate
    return release


def test_a_render_that_starts_pauses_the_import_and_it_goes_on_after(served, tmp_path):
    rendering = threading.Event()
    imports = ModelImports(tmp_path, rendering.is_set, poll_seconds=0.1)
    aside = tmp_path / "models" / ".sd15.import"
    release = hold_vae(served, aside)
    try:
        imports.start(served.url("sd15/"), "", "fp16", CAP_MB)
        wait_for(lambda: (aside / "unet" / "model.onnx").is_file(), what="the UNet written")
        rendering.set()
        wait_for(lambda: imports.state()["status"] == "waiting", 30, "the import to wait")
        release.set()
        time.sleep(1.0)
        assert imports.state()["status"] == "waiting"  # nothing runs beside the render
        rendering.clear()
        assert imports.wait(180)
    finally:
        release.set()
        served.gate = None
    assert imports.state()["status"] == "done"
    assert "kept from the stopped import: " in (tmp_path / LOG_FILE).read_text()


def test_resumed_at_the_next_start_after_the_child_was_killed(served, tmp_path, monkeypatch):
    """A power cut: the child dies mid-import and the daemon with it (its record still says running).
    The next start's ``resume`` runs the import again, which keeps the graphs already complete."""
    first = ModelImports(tmp_path, lambda: False, poll_seconds=0.1)
    monkeypatch.setattr(first, "_finish", lambda *_: None)  # the daemon died too: nothing more recorded
    aside = tmp_path / "models" / ".cut.import"
    release = hold_vae(served, aside)
    try:
        first.start(served.url("sd15/"), "cut", "fp16", CAP_MB)
        wait_for(lambda: (aside / "unet" / "model.onnx").is_file(), what="the UNet written")
        first.kill_child()
        assert first.wait(30)
    finally:
        release.set()
        served.gate = None
    assert read_json(tmp_path / STATE_FILE)["status"] == "running"
    assert not (tmp_path / "models" / "cut").exists() and aside.is_dir()
    again = ModelImports(tmp_path, lambda: False, poll_seconds=0.1)
    assert again.state()["status"] == "running"
    assert again.resume(CAP_MB)
    assert again.wait(180)
    assert again.state()["status"] == "done"
    assert "kept from the stopped import: " in (tmp_path / LOG_FILE).read_text()
    assert (tmp_path / "models" / "cut" / "vae_encoder" / "model.onnx").is_file()
    assert not again.resume(CAP_MB)  # done: nothing to resume


def test_the_daemon_resumes_an_interrupted_import_when_it_starts(served, tmp_path):
    """``frame run`` itself: a record left "running" by a power cut is picked up at start, the import
    child runs, and /api/models lists the model once it is complete."""
    from frame.statefile import write_json
    from tests.daemon.daemonproc import DaemonProcess, write_config

    config, url = write_config(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    write_json(state / STATE_FILE, {"url": served.url("sd15/"), "name": "after-cut", "weights": "uint8",
                                    "status": "running", "started_at": time.time(), "error": ""}, mode=0o600)
    daemon = DaemonProcess(config, url)
    try:
        answer: dict = {}

        def done() -> bool:
            nonlocal answer
            try:
                answer = daemon.get("/api/models").json()
            except Exception:
                return False
            return (answer.get("import") or {}).get("status") in ("done", "failed")

        wait_for(done, 180, "the resumed import")
        assert answer["import"]["status"] == "done", answer
        listed = {m["name"]: m for m in answer["models"]}
        assert (listed["after-cut"]["kind"], listed["after-cut"]["precision"]) == ("SD 1.x", "uint8")
    finally:
        daemon.terminate()
        daemon.kill()


def test_a_hostile_record_is_not_run(tmp_path):
    from frame.statefile import write_json

    for record in ({"url": "file:///etc/passwd", "name": "x", "weights": "fp16"},
                   {"url": "http://nas/x.safetensors", "name": "../../etc", "weights": "fp16"},
                   {"url": "http://nas/x.safetensors", "name": "x", "weights": "--into=/"}):
        write_json(tmp_path / STATE_FILE, {**record, "status": "running"})
        imports = ModelImports(tmp_path, lambda: False, poll_seconds=0.1)
        assert imports.resume(CAP_MB) and imports.wait(10)
        state = imports.state()
        assert state["status"] == "failed" and "is not usable" in state["error"], record
        assert not (tmp_path / LOG_FILE).exists()  # no child ran
