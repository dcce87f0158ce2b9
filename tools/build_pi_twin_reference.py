"""Record the x86 picture of the Pi twin's night: the reference the arm64 twin is compared with.

    python tools/build_pi_twin_reference.py [--out tests/fixtures/pi_twin]

Runs the same night the twin runs (tools/pi_twin.py), natively: the real daemon (``python -m frame run``)
on a temporary state folder with the twin's config (tools/pi_twin_phone.night_config), driven by the
same phone (queue + edit, settings save that schedules the night a minute ahead, upload and rating
mid-render). Writes the night's picture (``night-x86.png``, 256x160, lossless) and ``night-x86.json``
(prompt, seed, steps, size, and this machine's per-process peaks for the emulation-overhead
comparison in docs/pi-twin.md).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pi_twin_memory as memory  # noqa: E402
import pi_twin_phone as phone_mod  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "pi_twin"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def photo_jpeg(width: int = 1600, height: int = 1200) -> bytes:
    """A phone-sized photo (2 megapixels, JPEG): the upload mid-render."""
    import numpy as np
    from PIL import Image

    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([(x * 255 // width), (y * 255 // height), ((x + y) * 255 // (width + height))], -1)
    out = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8)).save(out, "JPEG", quality=90)
    return out.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--timeout", type=float, default=600, help="seconds the night may take")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state, port = Path(tmp) / "state", free_port()
        config = phone_mod.night_config(yaml.safe_load((ROOT / "config.yaml").read_text()), port)
        config["state_dir"] = str(state)
        (Path(tmp) / "config.yaml").write_text(yaml.safe_dump(config))
        daemon = subprocess.Popen([sys.executable, "-m", "frame", "--config", str(Path(tmp) / "config.yaml"), "run"],
                                  cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                  stdout=open(Path(tmp) / "daemon.log", "w"), stderr=subprocess.STDOUT)
        watch = memory.PeakWatch(lambda: memory.descendants(daemon.pid))
        try:
            phone = phone_mod.Phone(f"http://127.0.0.1:{port}", "")
            phone.wait_up(60)
            phone.token = (state / "token").read_text().strip()
            upload = args.out / "upload.jpg"
            if not upload.exists():
                args.out.mkdir(parents=True, exist_ok=True)
                upload.write_bytes(photo_jpeg())
            report = phone_mod.drive_night(phone, upload.read_bytes(), night_seconds=args.timeout, tick=watch.poll)
        except Exception:
            print((Path(tmp) / "daemon.log").read_text()[-4000:], file=sys.stderr)
            raise
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=30)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "night-x86.png").write_bytes(report.picture_png)
    peaks = {label: round(peak, 1) for label, (_, peak) in sorted(watch.by_label().items())}
    meta = {"prompt": phone_mod.EDITED_PROMPT, "seed": phone_mod.SEED, "steps": phone_mod.STEPS,
            "size": phone_mod.SIZE, "model": "demo", "machine": platform.machine(),
            "python": platform.python_version(), "render_seconds": round(report.render_seconds, 1),
            "peak_vmhwm_mib": peaks, "recorded": time.strftime("%Y-%m-%d")}
    (args.out / "night-x86.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta, indent=1))
    print("\n".join(report.actions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
