"""tools/install-pi.sh against a temporary root with the system commands stubbed (tests/install/fakesys.py).

Asserted: the steps and the changes in their order, that a second run changes nothing, that
``--dry-run`` prints the very changes a real run makes and changes nothing, and the refusals.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.install import fakesys

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "install-pi.sh"
STEPS = ["checks", "spi", "wifi", "user", "venv", "config", "state", "service", "status"]
READ_ONLY = {"id", "uname", "getent", "stat", "runuser"}


class Pi:
    """A temporary root that looks like a fresh Raspberry Pi OS bookworm, plus the fake commands."""

    def __init__(self, tmp_path: Path, network_manager: bool = True) -> None:
        self.root, self.sys_dir = tmp_path / "root", tmp_path / "fakesys"
        (self.root / "boot" / "firmware").mkdir(parents=True)
        (self.root / "boot" / "firmware" / "config.txt").write_text("# Raspberry Pi OS\ndtparam=audio=on\n")
        (self.root / "sys" / "class" / "net" / "wlan0").mkdir(parents=True)
        if network_manager:
            (self.root / "etc" / "NetworkManager" / "conf.d").mkdir(parents=True)
        fakesys.install_stubs(tmp_path / "bin", self.sys_dir)
        self.path = f"{tmp_path / 'bin'}:{os.environ['PATH']}"
        self.seen = 0

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        environment = {**os.environ, "PATH": self.path, "FRAME_ROOT": str(self.root), "FRAME_STATUS_WAIT": "0",
                       **env}
        done = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=environment,
                              timeout=120)
        all_calls = fakesys.calls(self.sys_dir)
        self.last_calls, self.seen = all_calls[self.seen:], len(all_calls)
        return done

    def changes(self) -> list[str]:
        """The state-changing commands of the last run, in order, with the root shown as ROOT."""
        out = []
        for name, *args in self.last_calls:
            if name in READ_ONLY or (name == "systemctl" and args[0] in ("is-enabled", "is-active")) or (
                    name == "frame" and args[:1] in (["config"], ["install-service"], ["status"])):
                continue
            out.append(" ".join([name, *args]).replace(str(self.root), "ROOT"))
        return out

    def snapshot(self) -> dict:
        files = {str(p.relative_to(self.root)): (p.read_bytes() if p.is_file() else None, p.stat().st_mode)
                 for p in sorted(self.root.rglob("*"))}
        return {"files": files, "state": json.loads((self.sys_dir / "state.json").read_text())}


def _steps(output: str) -> list[str]:
    return [line[3:] for line in output.splitlines() if line.startswith("== ")]


def _announced(output: str, dry: bool) -> list[str]:
    """Change lines as printed: "+ X" in a real run, "would run: X" / "would write: P" in a dry run."""
    prefixes = ("   would run: ", "   would write: ", "   would add: ") if dry else ("   + ",)
    lines = []
    for line in output.splitlines():
        for prefix in prefixes:
            if line.startswith(prefix):
                text = line[len(prefix):]
                lines.append(("write " if prefix.endswith("write: ") else "add " if prefix.endswith("add: ")
                              else "") + text)
    return lines


@pytest.fixture
def pi(tmp_path) -> Pi:
    return Pi(tmp_path)


def test_first_run_installs_everything_in_order(pi: Pi) -> None:
    done = pi.run()
    assert done.returncode == 0, done.stdout + done.stderr
    assert _steps(done.stdout) == STEPS
    assert pi.changes() == [
        "chgrp root ROOT/etc/NetworkManager/conf.d/frame-wifi-powersave.conf.frame-new",
        "systemctl reload NetworkManager",
        "iw dev wlan0 set power_save off",
        "useradd --system --user-group --home-dir /var/lib/frame --shell /usr/sbin/nologin frame",
        "usermod -aG spi frame",
        "usermod -aG gpio frame",
        "python3 -m venv ROOT/opt/frame",
        f"pip install --quiet --no-deps --require-hashes -r {REPO}/requirements-pi.txt",
        f"pip install --quiet --no-deps {REPO}",
        "chown root:frame ROOT/etc/frame",
        "chgrp frame ROOT/etc/frame/config.yaml.frame-new",
        "chown frame:frame ROOT/var/lib/frame",
        "chgrp root ROOT/etc/systemd/system/frame.service.frame-new",
        "systemctl daemon-reload",
        "systemctl enable frame",
        "systemctl start frame",
    ]
    root = pi.root
    assert (root / "boot/firmware/config.txt").read_text().splitlines()[-1] == "dtparam=spi=on"
    assert "wifi.powersave = 2" in (root / "etc/NetworkManager/conf.d/frame-wifi-powersave.conf").read_text()
    config = (root / "etc/frame/config.yaml").read_text()
    assert "\nstate_dir: /var/lib/frame\n" in config and "  panel: virtual" in config
    assert (root / "etc/frame/config.yaml").stat().st_mode & 0o777 == 0o640
    assert (root / "etc/systemd/system/frame.service").read_text() == fakesys.UNIT_TEXT
    assert (root / "var/lib/frame").stat().st_mode & 0o777 == 0o750
    state = pi.snapshot()["state"]
    assert state["users"]["frame"] == ["frame", "spi", "gpio"] and state["active"] == ["frame"]
    assert done.stdout.index("== status") < done.stdout.index("frame: running (fake status)")
    assert "SPI is enabled from the next boot: sudo reboot" in done.stdout


def test_a_second_run_changes_nothing(pi: Pi) -> None:
    assert pi.run().returncode == 0
    (pi.root / "dev").mkdir()
    (pi.root / "dev" / "spidev0.0").touch()  # after the reboot
    before = pi.snapshot()
    done = pi.run()
    assert done.returncode == 0, done.stdout + done.stderr
    assert _steps(done.stdout) == STEPS
    assert pi.changes() == [] and _announced(done.stdout, dry=False) == []
    assert pi.snapshot() == before
    assert "nothing to change" in done.stdout and "reboot" not in done.stdout
    assert ["frame", "status"] in pi.last_calls


def test_dry_run_prints_every_change_of_a_real_run_and_makes_none(tmp_path) -> None:
    dry_pi, real_pi = Pi(tmp_path / "a"), Pi(tmp_path / "b")
    before = dry_pi.snapshot()
    dry = dry_pi.run("--dry-run", FAKESYS_UID="1000")  # a dry run needs no root
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry_pi.changes() == [] and dry_pi.snapshot() == before
    assert _steps(dry.stdout) == STEPS
    real = real_pi.run()
    dry_changes = [line.replace(str(dry_pi.root), "ROOT") for line in _announced(dry.stdout, dry=True)]
    real_changes = [line.replace(str(real_pi.root), "ROOT") for line in _announced(real.stdout, dry=False)]
    assert dry_changes == real_changes and len(real_changes) >= 15
    assert "changes to make (dry run: nothing was changed)" in dry.stdout

    done = real_pi.run("--dry-run")
    assert real_pi.changes() == [] and "nothing to change" in done.stdout


def test_an_existing_config_is_kept_and_inky_gets_i2c_and_its_overlay(pi: Pi) -> None:
    (pi.root / "etc/frame").mkdir(parents=True)
    (pi.root / "etc/frame/config.yaml").write_text("display:\n  panel: inky\n")
    done = pi.run("--panel", "inky")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (pi.root / "etc/frame/config.yaml").read_text() == "display:\n  panel: inky\n"
    assert "yours: kept as it is" in done.stdout
    boot = (pi.root / "boot/firmware/config.txt").read_text().splitlines()
    assert boot[-3:] == ["dtparam=spi=on", "dtparam=i2c_arm=on", "dtoverlay=spi0-0cs"]
    assert "usermod -aG i2c frame" in pi.changes()


def test_a_new_config_gets_the_chosen_panel(pi: Pi) -> None:
    assert pi.run("--panel", "waveshare-7in3e").returncode == 0
    assert "\n  panel: waveshare-7in3e\n" in (pi.root / "etc/frame/config.yaml").read_text()


def test_without_network_manager_a_systemd_unit_turns_power_saving_off(tmp_path) -> None:
    pi = Pi(tmp_path, network_manager=False)
    assert pi.run().returncode == 0
    unit = (pi.root / "etc/systemd/system/frame-wifi-powersave.service").read_text()
    assert "ExecStart=/usr/sbin/iw dev wlan0 set power_save off" in unit
    assert pi.changes()[:4] == ["chgrp root ROOT/etc/systemd/system/frame-wifi-powersave.service.frame-new",
                                "systemctl daemon-reload", "systemctl enable frame-wifi-powersave.service",
                                "systemctl start frame-wifi-powersave.service"]
    assert pi.run().returncode == 0 and pi.changes() == []


def test_a_new_checkout_is_installed_again_and_the_service_restarted(pi: Pi, tmp_path) -> None:
    assert pi.run().returncode == 0
    (pi.root / "opt/frame/.frame-installed").write_text("an older checkout\n")
    assert pi.run().returncode == 0
    assert pi.changes() == [f"pip install --quiet --no-deps --require-hashes -r {REPO}/requirements-pi.txt",
                            f"pip install --quiet --no-deps {REPO}", "systemctl restart frame"]


def test_a_bad_config_stops_before_the_service(pi: Pi) -> None:
    done = pi.run(FAKESYS_CONFIG_CHECK="2")
    assert done.returncode == 1 and "config.yaml has problems" in done.stderr
    assert not any(change.startswith("systemctl") and "NetworkManager" not in change for change in pi.changes())
    assert "== service" not in done.stdout


@pytest.mark.parametrize("env, message", [({"FAKESYS_UID": "1000"}, "run as root"),
                                          ({"FAKESYS_ARCH": "armv7l"}, "needs 64-bit Raspberry Pi OS")])
def test_refuses_without_root_or_on_32_bit(pi: Pi, env: dict, message: str) -> None:
    done = pi.run(**env)
    assert done.returncode == 1 and message in done.stderr
    assert pi.changes() == []


def test_a_dry_run_shows_the_steps_on_a_machine_that_is_not_a_pi(pi: Pi) -> None:
    """Issue 29 item 24: --dry-run refused to run on x86 although it changes nothing."""
    before = pi.snapshot()
    dry = pi.run("--dry-run", FAKESYS_ARCH="x86_64", FAKESYS_UID="1000")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "this is x86_64, not 64-bit Raspberry Pi OS (aarch64): a real run refuses here" in dry.stdout
    assert _steps(dry.stdout) == STEPS and "changes to make (dry run: nothing was changed)" in dry.stdout
    assert pi.changes() == [] and pi.snapshot() == before
    real = pi.run(FAKESYS_ARCH="x86_64")
    assert real.returncode == 1 and "needs 64-bit Raspberry Pi OS (aarch64); this is x86_64" in real.stderr


def test_no_plots_installs_the_lock_without_matplotlib_s_packages_and_removes_them(pi: Pi) -> None:
    lock = (REPO / "requirements-pi.txt").read_text()
    plots_only = next(line for line in lock.splitlines() if line.startswith("# plots-only: ")).split()[2:]
    assert "matplotlib" in plots_only and "numpy" not in plots_only
    assert pi.run().returncode == 0
    assert (pi.sys_dir / "requirements-seen.txt").read_text() == lock
    site = pi.root / "opt/frame/lib/python3.11/site-packages"
    (site / "matplotlib").mkdir(parents=True)  # as the first run installed it

    done = pi.run("--no-plots")
    assert done.returncode == 0, done.stdout + done.stderr
    changes = pi.changes()
    assert changes[0] == "pip uninstall --quiet --yes " + " ".join(plots_only)
    assert changes[1].startswith("pip install --quiet --no-deps --require-hashes -r /")
    assert changes[2:] == [f"pip install --quiet --no-deps {REPO}", "systemctl restart frame"]
    lighter = (pi.sys_dir / "requirements-seen.txt").read_text()
    names = {line.split("==")[0] for line in lighter.splitlines() if line[:1].isalpha()}
    assert names == {line.split("==")[0] for line in lock.splitlines() if line[:1].isalpha()} - set(plots_only)
    # each entry ends its name line and all but its last hash line with a backslash: nothing orphaned
    assert "--hash=sha256:" in lighter and lighter.count(" \\\n") == lighter.count("--hash=")

    shutil.rmtree(site / "matplotlib")
    assert pi.run("--no-plots").returncode == 0 and pi.changes() == []


def test_the_installers_own_variables_stay_out_of_frame(pi: Pi) -> None:
    """FRAME_ROOT and FRAME_STATUS_* are the installer's; frame would read them as configuration keys
    and 'frame config check' would refuse them (met in the Pi twin, which sets FRAME_STATUS_TRIES)."""
    done = pi.run(FRAME_STATUS_TRIES="1")
    assert done.returncode == 0, done.stderr
    assert "unknown keys" not in done.stdout + done.stderr
