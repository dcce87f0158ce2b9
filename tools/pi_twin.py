"""The Pi twin: the whole frame on arm64 Debian in a Raspberry Pi Zero 2 W's memory, under qemu-user.

    sudo python tools/pi_twin.py [--cache /var/cache/frame-pi-twin] [--work /var/tmp/frame-pi-twin]

Needs root (chroot, mounts, a memory cgroup) and a Linux host with binfmt_misc; installs
debootstrap, qemu-user-static, binfmt-support, zstd and systemd-container with apt-get if missing.
Steps (docs/pi-twin.md says why each is so):

1. the base rootfs: Debian bookworm arm64 (tools/pi-twin-rootfs.recipe), cached outside the clone;
2. tools/install-pi.sh runs for real inside it (tools/pi_twin_install.py): wheels only, hashes
   checked, the frame user, config, state folder and systemd unit;
3. one memory cgroup with swap off whose limit is the budget (tools/pi_twin_memory.py): the Pi's
   512 MiB minus Raspberry Pi OS Lite's idle use, plus qemu-user's measured per-process overhead;
4. in it, the unit's ExecStart as its User (``frame run``: daemon and workers) through a whole
   night on the bundled demo model while a phone (tools/pi_twin_phone.py) loads pages, queues and
   edits a prompt, saves settings, uploads a photo and rates it mid-render, with MQTT on: a host
   mosquitto and a client playing Home Assistant (tools/pi_twin_mqtt.py);
5. the night's picture against the x86 reference (tests/fixtures/pi_twin, tools/build_pi_twin_reference.py);
6. in the same cgroup, a slice of the test suite (engine, samplers, display preparation, store).

Exit 1 on an OOM kill, a failed night, a picture outside the tolerance, a failed test, or memory over
the budget; the peaks are printed either way. Exit 77 (``CANNOT_RUN``, printing why) only when this
machine cannot run the twin at all: not root, no binfmt_misc for aarch64, no memory cgroup. ``.ci/run``
skips the stage on 77 and fails on anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pi_twin_install as install_mod  # noqa: E402
import pi_twin_memory as memory  # noqa: E402
import pi_twin_mqtt as mqtt_mod  # noqa: E402
import pi_twin_phone as phone_mod  # noqa: E402
import pi_twin_rootfs as rootfs_mod  # noqa: E402
import pi_twin_slice as slice_mod  # noqa: E402
import pi_twin_taste as taste_mod  # noqa: E402
from pi_twin_rootfs import log  # noqa: E402

ROOT = rootfs_mod.ROOT
PORT = 18080
IDLE = "import time; time.sleep(0.5); print(open('/proc/self/status').read())"
CANNOT_RUN = 77  # this machine cannot run the twin (not a failure of frame): .ci/run skips the stage


def cannot_run_here() -> str | None:
    """Why this machine cannot run the twin at all (None: it can): root for chroot, mounts and the
    cgroup; a memory cgroup of either version; binfmt_misc to run aarch64 code through qemu-user."""
    if os.geteuid() != 0:
        return "needs root (chroot, mounts, a memory cgroup)"
    if not memory.Cgroup.available():
        return "no memory cgroup here (neither v2 memory.max nor v1 memory.limit_in_bytes)"
    if not Path("/proc/sys/fs/binfmt_misc").is_dir():
        return "this kernel has no binfmt_misc (/proc/sys/fs/binfmt_misc): aarch64 code cannot run here"
    return None


def qemu_overhead_mib(rootfs: Path) -> tuple[float, float]:
    """VmHWM of the same idle CPython 3.11 (Debian bookworm's) native and emulated, in MiB."""
    native = subprocess.run(["/usr/bin/python3", "-c", IDLE], capture_output=True, text=True, timeout=60, check=True)
    emulated = install_mod.in_chroot(rootfs, ["/usr/bin/python3", "-c", IDLE], 120)
    return (memory.status_kib(native.stdout, "VmHWM") / 1024, memory.status_kib(emulated.stdout, "VmHWM") / 1024)


TASTE_SETTINGS = ("import json; from frame.config import load_config; c = load_config('/etc/frame/config.yaml'); "
                  "print(json.dumps([list(c.taste.themes), list(c.taste.styles), c.taste.min_ratings]))")


def write_night_config(rootfs: Path) -> tuple[list[str], list[str], int]:
    """The installer's /etc/frame/config.yaml with the twin's night settings (mode and group kept);
    returns its taste themes, styles and min_ratings as frame reads them."""
    path = rootfs / "etc/frame/config.yaml"
    stat = path.stat()
    config = phone_mod.night_config(yaml.safe_load(path.read_text()), PORT)
    config = mqtt_mod.mqtt_config(taste_mod.taste_config(config))
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    os.chown(path, stat.st_uid, stat.st_gid)
    os.chmod(path, stat.st_mode)
    install_mod.in_chroot(rootfs, ["/opt/frame/bin/frame", "config", "check", "/etc/frame/config.yaml"], 300)
    settings = install_mod.in_chroot(rootfs, ["/opt/frame/bin/python", "-c", TASTE_SETTINGS], 300)
    themes, styles, min_ratings = json.loads(settings.stdout.strip().splitlines()[-1])
    return themes, styles, min_ratings


def seed_ratings(rootfs: Path, unit: install_mod.Unit, themes: list[str], styles: list[str], min_ratings: int) -> int:
    """The taste night's rated pictures, written by frame's store code as the unit's user (before the
    daemon starts); returns how many."""
    plan = taste_mod.rated_plan(themes, styles)
    if len(plan) < min_ratings:
        raise ValueError(f"{len(plan)} seeded ratings do not reach taste.min_ratings {min_ratings}")
    done = install_mod.in_chroot(rootfs, ["/opt/frame/bin/python", "-c", taste_mod.SEED_SCRIPT,
                                          "/etc/frame/config.yaml", json.dumps(plan)], 300, user=unit.user)
    return int(done.stdout.strip().splitlines()[-1])


def start_daemon(rootfs: Path, unit: install_mod.Unit, cgroup: memory.Cgroup, log_path: Path) -> subprocess.Popen:
    """``systemctl start frame`` without systemd: the unit's ExecStart as its User, in the cgroup."""
    env = {"PATH": install_mod.CHROOT_PATH, "LANG": "C.UTF-8", "HOME": "/var/lib/frame", **unit.environment}
    command = ["chroot", f"--userspec={unit.user}:{unit.group}", str(rootfs), "env", "-i",
               *(f"{k}={v}" for k, v in env.items()), *unit.exec_start]
    log("starting the unit's ExecStart in the cgroup: " + " ".join(unit.exec_start))
    return subprocess.Popen(command, stdout=log_path.open("w"), stderr=subprocess.STDOUT,
                            preexec_fn=lambda: cgroup.add(os.getpid()), start_new_session=True)


def stop(process: subprocess.Popen, seconds: float = 30) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


class Poller(threading.Thread):
    """Polls the cgroup's processes every ``every`` seconds until stopped (short children included)."""

    def __init__(self, watch: memory.PeakWatch, every: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.watch, self.every, self.done = watch, every, threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.watch.poll()


def night(rootfs: Path, cgroup: memory.Cgroup, work: Path, minutes: float,
          taste: tuple[list[str], list[str], int]) -> tuple[dict, memory.PeakWatch]:
    """The queued-prompt night (its picture is compared with x86), then the taste night
    (tools/pi_twin_taste.py), with the phone on the page throughout."""
    unit = install_mod.parse_unit((rootfs / install_mod.UNIT).read_text())
    log(f"seeded {seed_ratings(rootfs, unit, *taste)} rated pictures for the taste night")
    watch = memory.PeakWatch(cgroup.pids)
    poller = Poller(watch)
    poller.start()
    started = time.monotonic()
    home = mqtt_mod.HomeAssistant(work)  # before the daemon: it connects at start
    daemon = start_daemon(rootfs, unit, cgroup, work / "daemon.log")
    result: dict = {}
    try:
        phone = phone_mod.Phone(f"http://127.0.0.1:{PORT}", "", timeout=120)
        phone.wait_up(300)
        phone.token = (rootfs / "var/lib/frame/token").read_text().strip()
        photo = (ROOT / "tests/fixtures/pi_twin/upload.jpg").read_bytes()
        report = phone_mod.drive_night(phone, photo, night_seconds=minutes * 60)
        result.update({"picture_png": report.picture_png, "render_seconds": report.render_seconds,
                  "night_seconds": report.night_seconds, "page_loads": report.page_loads,
                  "actions": report.actions})

        def browse() -> None:
            phone.page(phone_mod.PAGES[int(time.monotonic()) % len(phone_mod.PAGES)])

        log("the taste night: render now, no queued prompt, the trained model chooses")
        chosen = taste_mod.drive_taste_night(phone, night_seconds=minutes * 60, until=phone_mod.until, browse=browse)
        result.update(taste=chosen, page_loads=phone.page_loads, total_seconds=time.monotonic() - started)
        result.update(mqtt=home.describe(), mqtt_problems=home.problems())  # while the frame is online
    except Exception as exc:
        log(f"the night failed: {type(exc).__name__}: {exc}")
        result["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        stop(daemon)
        home.close()
        poller.done.set()
        poller.join(5)
    log_text = (work / "daemon.log").read_text(errors="replace")
    if "error" in result:
        print(log_text[-6000:])
    return result, watch


def print_peaks(title: str, watch: memory.PeakWatch, cgroup_peak: float, budget: memory.Budget) -> None:
    print(f"\n{title}")
    print(f"  {'process':<16}{'count':>6}{'peak VmHWM (MiB)':>20}")
    for label, (count, peak) in sorted(watch.by_label().items(), key=lambda item: -item[1][1]):
        print(f"  {label:<16}{count:>6}{peak:>20.1f}")
    print(f"  most processes at once: {watch.most_processes}; largest sum of VmRSS at once: "
          f"{watch.rss_sum_kib / 1024:.1f} MiB")
    print(f"  cgroup peak (page cache included): {cgroup_peak:.1f} MiB of {budget.limit_mib:.1f} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=rootfs_mod.CACHE, help="rootfs, wheel and venv cache")
    parser.add_argument("--work", type=Path, default=Path("/var/tmp/frame-pi-twin"), help="the twin's rootfs")
    parser.add_argument("--os-baseline-mib", type=float, default=memory.OS_BASELINE_MIB,
                        help="what Raspberry Pi OS Lite holds at idle on a Pi Zero 2 W (see docs/pi-twin.md)")
    parser.add_argument("--night-minutes", type=float, default=15, help="the longest the emulated night may take")
    parser.add_argument("--skip-tests", action="store_true", help="leave out the test slice")
    parser.add_argument("--limit-mib", type=float, help="diagnosis: the cgroup's limit instead of the budget "
                        "(to see how far over it frame goes without an OOM kill); the budget is still checked")
    args = parser.parse_args()
    reason = cannot_run_here()
    if reason:
        print(f"pi-twin: cannot run on this machine: {reason}", file=sys.stderr)
        return CANNOT_RUN
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("pi-twin: stopped (SIGTERM)"))  # cleanup runs
    started = time.monotonic()
    args.cache.mkdir(parents=True, exist_ok=True)
    rootfs_mod.ensure_host_tools()
    try:
        rootfs_mod.enable_binfmt()
    except (subprocess.SubprocessError, RuntimeError) as exc:
        print(f"pi-twin: cannot run on this machine: aarch64 binfmt_misc cannot be enabled ({exc})", file=sys.stderr)
        return CANNOT_RUN
    tarball = rootfs_mod.build_rootfs(args.cache, timeout=40 * 60)
    wheels = rootfs_mod.host_wheels(args.cache)
    rootfs = args.work / "rootfs"
    subprocess.run(["umount", "-R", "-l", str(rootfs)], capture_output=True, timeout=60, check=False)
    shutil.rmtree(rootfs, ignore_errors=True)
    rootfs_mod.unpack(tarball, rootfs)
    rootfs_mod.copy_repo(rootfs)
    failures: list[str] = []
    with rootfs_mod.mounted(rootfs, wheels):
        t = time.monotonic()
        output = install_mod.install(rootfs, args.cache, timeout=20 * 60)
        print(output)
        log(f"tools/install-pi.sh ran in the rootfs in {time.monotonic() - t:.0f} s (systemctl: chroot mode; "
            "the unit's ExecStart is started below, see docs/pi-twin.md)")
        taste = write_night_config(rootfs)
        native, emulated = qemu_overhead_mib(rootfs)
        budget = memory.budget(emulated - native, args.os_baseline_mib)
        log(f"qemu-user overhead: idle python3 VmHWM {emulated:.1f} MiB emulated vs {native:.1f} MiB native")
        log(budget.describe())
        limit = args.limit_mib or budget.limit_mib
        for stale in memory.Cgroup.stale():  # left by a twin that was killed before its cleanup
            log(f"removing the stale cgroup {stale.path}")
            stale.remove()
        cgroup = memory.Cgroup.create(memory.cgroup_name(os.getpid()), limit)
        log(f"cgroup v{cgroup.version} {cgroup.path}: limit {limit:.1f} MiB, swap off "
            f"({cgroup.swap_off()})")
        try:
            result, watch = night(rootfs, cgroup, args.work, args.night_minutes, taste)
            night_peak, night_ooms = cgroup.peak_mib(), cgroup.oom_kills()
            print_peaks("the night (frame run + phone)", watch, night_peak, budget)
            if "error" in result:
                failures.append(f"the night failed: {result['error']}")
            else:
                print(f"  night: render {result['render_seconds']:.0f} s emulated, whole night "
                      f"{result['night_seconds']:.0f} s, {result['page_loads']} page loads")
                print("  " + "\n  ".join(result["actions"]))
                chosen = result["taste"]
                print(f"  taste night: picture {chosen.picture_id} '{chosen.prompt}' in {chosen.seconds:.0f} s "
                      f"(render now → picture), plot {chosen.plot or 'none'}: {chosen.sentence}")
                print(f"  {result['mqtt']}")
                failures += [f"MQTT: {problem}" for problem in result["mqtt_problems"]]
                (args.work / "night-aarch64.png").write_bytes(result["picture_png"])
                verdict = slice_mod.compare_with_reference(result["picture_png"])
                print(f"  aarch64 vs x86 picture: {verdict.describe()}")
                if not verdict.ok:
                    failures.append(f"the aarch64 picture differs from x86 beyond the tolerance: {verdict.describe()}")
            if night_ooms:
                failures.append(f"OOM kill in the night ({night_ooms})")
            if night_peak > budget.limit_mib:
                failures.append(f"the cgroup's peak {night_peak:.1f} MiB is over the budget")
            if not args.skip_tests:
                cgroup.reset_peak()
                test_watch = memory.PeakWatch(cgroup.pids)
                poller = Poller(test_watch, every=1.0)
                poller.start()
                passed, summary, seconds = slice_mod.run_slice(rootfs, cgroup, timeout=15 * 60)
                poller.done.set()
                print_peaks("the test slice", test_watch, cgroup.peak_mib(), budget)
                print(f"  {summary} in {seconds:.0f} s emulated")
                if not passed:
                    failures.append(f"the test slice failed: {summary}")
                if cgroup.oom_kills() > night_ooms:
                    failures.append("OOM kill in the test slice")
        finally:
            cgroup.remove()
    print(f"\npi-twin: {time.monotonic() - started:.0f} s in all; " + budget.describe())
    if failures:
        print("pi-twin: FAILED\n  " + "\n  ".join(failures))
        return 1
    print("pi-twin: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
