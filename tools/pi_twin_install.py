"""The Pi twin's install step: tools/install-pi.sh run for real inside the arm64 rootfs, and the unit it wrote.

Used by tools/pi_twin.py. The installer runs under ``chroot`` with a clean environment (``env -i``:
the host's pip settings must not leak in) as root, exactly as ``sudo tools/install-pi.sh`` on a Pi:
it creates the ``frame`` user, the venv /opt/frame from requirements-pi.txt (wheels only,
``--require-hashes``), /etc/frame/config.yaml, /var/lib/frame and the systemd unit. Two things
differ from a Pi, both visible in its output:

* pip installs offline from the wheels downloaded on the host (``PIP_NO_INDEX``/``PIP_FIND_LINKS``,
  the same files and hashes the registry serves) instead of fetching them emulated;
* there is no running systemd in a chroot (nor on this host: PID 1 is not systemd, and
  ``systemd-nspawn -b`` of the rootfs did not come up, see docs/pi-twin.md). With
  ``SYSTEMD_OFFLINE=1`` systemctl works on the rootfs offline: ``enable`` writes the symlink,
  ``daemon-reload``/``start``/``restart``/``is-active`` print "Running in chroot, ignoring command"
  and succeed. The twin then starts the unit's own ExecStart, User, Group and Environment (parsed
  below) inside the memory cgroup: the "shim" for ``systemctl start frame``.

The venv is cached after a first install (``CACHE/venv-<sha16 of recipe + lock>.tar.zst``) and put
back before the installer runs, so a later run only reinstalls frame itself (its stamp changed).
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pi_twin_rootfs as rootfs_mod

CHROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
UNIT = "etc/systemd/system/frame.service"
VENV = "opt/frame"


@dataclass(frozen=True)
class Unit:
    """What ``systemctl start frame`` would run: the unit's ExecStart, as User/Group, with Environment."""

    exec_start: list[str]
    user: str
    group: str
    environment: dict[str, str] = field(default_factory=dict)


def parse_unit(text: str) -> Unit:
    """The [Service] fields the twin needs from a systemd unit file; refuses a unit without them."""
    section, values, environment = "", {}, {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
            continue
        key, _, value = line.partition("=")
        if section != "[Service]":
            continue
        if key == "Environment":
            for item in shlex.split(value):
                name, _, setting = item.partition("=")
                environment[name] = setting
        else:
            values[key] = value
    missing = [key for key in ("ExecStart", "User") if not values.get(key)]
    if missing:
        raise ValueError(f"the frame unit has no {', '.join(missing)} in [Service]")
    return Unit(shlex.split(values["ExecStart"]), values["User"], values.get("Group", values["User"]), environment)


def chroot_env(**extra: str) -> list[str]:
    """``env -i`` with only what a root shell on a Pi has, plus ``extra``."""
    settings = {"PATH": CHROOT_PATH, "HOME": "/root", "LANG": "C.UTF-8", **extra}
    return ["env", "-i", *(f"{key}={value}" for key, value in settings.items())]


def in_chroot(rootfs: Path, command: list[str], timeout: float, user: str | None = None,
              check: bool = True, **env: str) -> subprocess.CompletedProcess:
    userspec = [f"--userspec={user}:{user}"] if user else []
    return subprocess.run(["chroot", *userspec, str(rootfs), *chroot_env(**env), *command], timeout=timeout,
                          check=check, text=True, capture_output=True)


def venv_cache(cache: Path) -> Path:
    return cache / f"venv-{rootfs_mod.key_of(rootfs_mod.RECIPE, rootfs_mod.ROOT / 'requirements-pi.txt')}.tar.zst"


def install(rootfs: Path, cache: Path, timeout: float) -> str:
    """Run tools/install-pi.sh inside the rootfs (already mounted); returns its output. Raises with its
    output when it fails."""
    cached = venv_cache(cache)
    if cached.exists():
        rootfs_mod.log(f"venv: restoring {cached} before the installer runs")
        rootfs_mod.unpack(cached, rootfs / VENV)
    installer = f"{rootfs_mod.REPO_IN_ROOTFS}/tools/install-pi.sh"
    done = in_chroot(rootfs, ["bash", installer], timeout, check=False,
                     PIP_NO_INDEX="1", PIP_FIND_LINKS=rootfs_mod.WHEELS_IN_ROOTFS,
                     PIP_CERT="/etc/ssl/certs/ca-certificates.crt", PIP_DISABLE_PIP_VERSION_CHECK="1",
                     FRAME_STATUS_TRIES="1", FRAME_STATUS_WAIT="0", SYSTEMD_OFFLINE="1")
    output = done.stdout + done.stderr
    if not cached.exists() and (rootfs / VENV / ".frame-installed").exists():  # also when a later step failed
        rootfs_mod.pack(rootfs / VENV, cached)
        rootfs_mod.log(f"venv: cached as {cached}")
    if done.returncode != 0:
        raise RuntimeError(f"tools/install-pi.sh failed in the arm64 rootfs (exit {done.returncode}):\n{output}")
    enabled = in_chroot(rootfs, ["systemctl", "is-enabled", "frame"], 120, check=False,
                        SYSTEMD_OFFLINE="1").stdout.strip()
    if enabled != "enabled":
        raise RuntimeError(f"after the installer, systemctl is-enabled frame says {enabled!r}, not 'enabled'")
    return output


def install_pytest(rootfs: Path, target: str, timeout: float) -> None:
    """pytest for the test slice into its own folder (``--target``), offline from the host's wheels,
    so frame's venv stays exactly what the installer made."""
    in_chroot(rootfs, [f"/{VENV}/bin/pip", "install", "--quiet", "--no-index", "--find-links",
                       rootfs_mod.WHEELS_IN_ROOTFS, "--target", target, "pytest"], timeout)
