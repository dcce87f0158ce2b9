"""The Pi twin's arm64 Debian rootfs: built once with debootstrap under qemu-user, cached outside the clone.

Used by tools/pi_twin.py. The base rootfs is described by tools/pi-twin-rootfs.recipe; the sha256 of
that file names the cached tarball (``CACHE/rootfs-<sha16>.tar.zst``), so editing the recipe builds a
new one and an unchanged recipe restores in seconds. Packages come from the Debian mirror this
machine's apt already uses (/etc/apt/sources.list*). The wheels frame installs are downloaded on the
host (native pip, no emulation) into ``CACHE/wheels-<sha16 of requirements-pi.txt>``; pip inside the
rootfs then installs offline from that folder (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``), still checking
every hash of requirements-pi.txt.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "tools" / "pi-twin-rootfs.recipe"
CACHE = Path("/var/cache/frame-pi-twin")
HOST_PACKAGES = {"debootstrap": "debootstrap", "qemu-aarch64-static": "qemu-user-static",
                 "update-binfmts": "binfmt-support", "zstd": "zstd", "systemd-nspawn": "systemd-container"}
# what the rootfs needs beyond the lock: build isolation for `pip install REPO`, and the test slice
BUILD_AND_TEST = ("setuptools>=68", "wheel", "pytest>=7.4")
WHEELS_IN_ROOTFS = "/var/cache/pi-twin-wheels"
REPO_IN_ROOTFS = "/root/frame"


def log(message: str) -> None:
    print(f"[pi-twin {time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(command: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """A command with a bound on its time (every wait in the twin is bounded)."""
    return subprocess.run(command, check=True, timeout=timeout, **kwargs)


def recipe(text: str) -> dict[str, str]:
    """``key value`` lines of the recipe (``#`` comments); suite, arch, variant and include are needed."""
    fields = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, _, value = line.partition(" ")
            fields[key] = value.strip()
    missing = {"suite", "arch", "variant", "include"} - set(fields)
    if missing:
        raise ValueError(f"the rootfs recipe lacks {', '.join(sorted(missing))}")
    return fields


def key_of(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def debian_mirror(suite: str, sources: list[tuple[str, str]]) -> str:
    """The Debian mirror for ``suite`` from apt source files given as (name, text): deb822 ``.sources``
    (URIs/Suites stanzas) or one-line ``deb URI SUITE ...`` lists."""
    for name, text in sources:
        if name.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
                if (fields.get("Types", "").split()[:1] == ["deb"] and suite in fields.get("Suites", "").split()
                        and fields.get("Enabled", "yes") != "no"):
                    return fields["URIs"].split()[0]
        else:
            for line in text.splitlines():
                parts = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
                if len(parts) >= 3 and parts[0] == "deb" and parts[2] == suite:
                    return parts[1]
    raise RuntimeError(f"no Debian mirror for {suite} in /etc/apt/sources.list*")


def machine_sources() -> list[tuple[str, str]]:
    files = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    return [(path.name, path.read_text()) for path in files if path.is_file()
            and (path.name.endswith(".sources") or path.name.endswith(".list"))]


def ensure_host_tools() -> None:
    """debootstrap, qemu-user-static, binfmt-support, zstd, systemd-container: installed if missing."""
    missing = sorted({package for tool, package in HOST_PACKAGES.items() if shutil.which(tool) is None})
    if missing:
        log(f"installing {' '.join(missing)} (apt-get)")
        run(["apt-get", "update", "-qq"], 600)
        run(["apt-get", "install", "-y", "-qq", *missing], 900,
            env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


def enable_binfmt() -> None:
    """Let the kernel run aarch64 binaries through qemu-user (binfmt_misc)."""
    if not Path("/proc/sys/fs/binfmt_misc/register").exists():
        run(["mount", "-t", "binfmt_misc", "binfmt_misc", "/proc/sys/fs/binfmt_misc"], 30)
    run(["update-binfmts", "--enable", "qemu-aarch64"], 60)
    entry = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
    if not entry.exists() or "enabled" not in entry.read_text():
        raise RuntimeError("binfmt_misc has no enabled qemu-aarch64 entry: aarch64 binaries cannot run")


def build_rootfs(cache: Path, timeout: float) -> Path:
    """The cached base rootfs tarball for the recipe, built first if missing (debootstrap --foreign on
    the host, then its second stage inside the rootfs, emulated)."""
    fields = recipe(RECIPE.read_text())
    tarball = cache / f"rootfs-{key_of(RECIPE)}.tar.zst"
    if tarball.exists():
        log(f"base rootfs: cached {tarball}")
        return tarball
    mirror = debian_mirror(fields["suite"], machine_sources())
    work = cache / f"build-{key_of(RECIPE)}"
    shutil.rmtree(work, ignore_errors=True)
    started = time.monotonic()
    log(f"base rootfs: debootstrap {fields['suite']} {fields['arch']} from {mirror} (first stage)")
    run(["debootstrap", f"--arch={fields['arch']}", "--foreign", f"--variant={fields['variant']}",
         f"--include={fields['include']}", fields["suite"], str(work), mirror], timeout)
    log("base rootfs: second stage (emulated)")
    run(["chroot", str(work), "/debootstrap/debootstrap", "--second-stage"],
        timeout - (time.monotonic() - started))
    (work / "etc/apt/sources.list").write_text(f"deb {mirror} {fields['suite']} main\n")
    for leftover in ("proc", "sys"):  # the second stage unmounts them; a cut-short one may not have
        subprocess.run(["umount", "-R", "-l", str(work / leftover)], capture_output=True, timeout=30, check=False)
    pack(work, tarball)
    shutil.rmtree(work)
    log(f"base rootfs: built in {time.monotonic() - started:.0f} s -> {tarball}")
    return tarball


def pack(folder: Path, tarball: Path) -> None:
    partial = tarball.with_suffix(".partial")
    run(["tar", "--numeric-owner", "--xattrs", "-I", "zstd -T0 -3", "-C", str(folder), "-cf", str(partial), "."], 900)
    partial.rename(tarball)


def unpack(tarball: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    run(["tar", "--numeric-owner", "--xattrs", "-I", "zstd -T0", "-C", str(folder), "-xf", str(tarball)], 600)


def host_wheels(cache: Path, python: str = "3.11") -> Path:
    """The locked aarch64 wheels (tools/pi_wheels.py download) plus setuptools, wheel and pytest, on the
    host into a cache folder named by requirements-pi.txt; reused while the lock is unchanged."""
    folder = cache / f"wheels-{key_of(ROOT / 'requirements-pi.txt')}"
    done = folder / ".complete"
    if done.exists():
        log(f"wheels: cached {folder}")
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    log(f"wheels: downloading the aarch64 wheels of requirements-pi.txt into {folder} (host pip)")
    run([sys.executable, str(ROOT / "tools" / "pi_wheels.py"), "download", str(folder), "--python", python], 900)
    run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--python-version", python,
         "--platform", "manylinux_2_17_aarch64", "--implementation", "cp", "--dest", str(folder),
         *BUILD_AND_TEST], 600)
    done.write_text("ok\n")
    return folder


@contextlib.contextmanager
def mounted(rootfs: Path, wheels: Path) -> Iterator[None]:
    """/proc, /sys, /dev and the host wheel cache (read-only) inside the rootfs, unmounted after."""
    (rootfs / WHEELS_IN_ROOTFS.lstrip("/")).mkdir(parents=True, exist_ok=True)
    mounts = [(["-t", "proc", "proc"], "proc"), (["-t", "sysfs", "sysfs"], "sys"),
              (["--rbind", "/dev"], "dev"), (["--bind", str(wheels)], WHEELS_IN_ROOTFS.lstrip("/"))]
    done: list[Path] = []
    try:
        for options, target in mounts:
            run(["mount", *options, str(rootfs / target)], 30)
            done.append(rootfs / target)
        run(["mount", "-o", "remount,bind,ro", str(rootfs / WHEELS_IN_ROOTFS.lstrip("/"))], 30)
        shutil.copy("/etc/resolv.conf", rootfs / "etc/resolv.conf")
        yield
    finally:
        for target in reversed(done):
            subprocess.run(["umount", "-R", "-l", str(target)], timeout=30, check=False)


def copy_repo(rootfs: Path) -> Path:
    """This checkout's files (tracked and new, not ignored ones) into the rootfs, as a clone on a Pi."""
    dest = rootfs / REPO_IN_ROOTFS.lstrip("/")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True, timeout=60).stdout.split(b"\0")
    for name in filter(None, files):
        source = ROOT / name.decode()
        if source.is_file():
            target = dest / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest
