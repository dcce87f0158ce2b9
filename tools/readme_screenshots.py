"""Make README's two pictures (docs/images/): the phone page at 390 px and the virtual panel's panel.png.

Dev-only (playwright and Debian's /usr/bin/chromium, as tests/web uses them; never `playwright install`).
Both pictures are of a real `frame demo` night, so they show what an owner's first command shows:
the demo runs in a scratch folder, its daemon serves the phone page on a free 127.0.0.1 port (its night
moved off the clock so no render starts while the page is photographed), chromium logs in with the
token `frame token` prints, as tests/web/browser.py's log_in does, and photographs the Now page.
The PNGs are written as palette images (the panel's six inks exactly; the page in 64 colours) to keep
README's pictures to a few hundred KB.

    PYTHONPATH=$PWD .venv/bin/python tools/readme_screenshots.py [--out docs/images]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
FRAME = [sys.executable, "-m", "frame"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _palette_png(source: Path | Image.Image, out: Path, colours: int) -> None:
    image = source if isinstance(source, Image.Image) else Image.open(source)
    image.convert("RGB").quantize(colors=colours, method=Image.Quantize.MEDIANCUT,
                                  dither=Image.Dither.NONE).save(out, optimize=True)


def _wait_for(url: str, seconds: float = 60.0) -> None:
    import requests

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            requests.get(url, timeout=2)
            return
        except requests.RequestException:
            time.sleep(0.5)
    raise SystemExit(f"the demo's daemon did not answer at {url} within {seconds:.0f} s")


def _phone_page(server: str, token: str, profile: Path) -> Image.Image:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=ARGS, headless=True,
            viewport={"width": 390, "height": 844}, device_scale_factor=1, is_mobile=True, has_touch=True)
        try:
            page = context.new_page()
            page.goto(server + "/login?next=/")
            page.get_by_label("Owner token").fill(token)
            page.get_by_role("button", name="Log in").click()
            expect(page.get_by_role("button", name="Log out", exact=True)).to_be_visible(timeout=15_000)
            page.wait_for_load_state("networkidle")
            shot = profile.parent / "phone.png"
            page.screenshot(path=str(shot))
        finally:
            context.close()
    return Image.open(shot)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="frame-readme-") as scratch:
        work = Path(scratch)
        subprocess.run([*FRAME, "demo"], cwd=work, check=True)
        config = str(work / "frame-demo" / "config.yaml")
        port = _free_port()
        env = dict(os.environ, FRAME_WEB__LISTEN=f"127.0.0.1:{port}", FRAME_SCHEDULE__RENDER_AT="13:00",
                   FRAME_SCHEDULE__DEADLINE="14:00", FRAME_SCHEDULE__SHOW_AT="14:00",
                   FRAME_SCHEDULE__MISFIRE_GRACE_MINUTES="1")
        daemon = subprocess.Popen([*FRAME, "--config", config, "run"], cwd=work, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            server = f"http://127.0.0.1:{port}"
            _wait_for(server + "/login")
            token = subprocess.run([*FRAME, "--config", config, "token"], cwd=work, env=env, check=True,
                                   capture_output=True, text=True).stdout.strip()
            phone = _phone_page(server, token, work / "profile")
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)
        _palette_png(phone, args.out / "phone-page.png", 64)
        _palette_png(work / "frame-demo" / "display" / "panel.png", args.out / "panel.png", 16)
    for name in ("phone-page.png", "panel.png"):
        print(f"{args.out / name}: {(args.out / name).stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
