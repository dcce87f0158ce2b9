"""The systemd unit: one template rendered by ``frame install-service`` (with this machine's Python and
user) and committed as ``systemd/frame.service`` with the defaults (a test keeps the two identical)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

DEFAULT_EXEC = "/usr/local/bin/frame run"
UNIT_PATH = Path("/etc/systemd/system/frame.service")

UNIT_TEMPLATE = """\
# frame: the set-and-forget generative e-paper frame daemon.
# Install: sudo useradd --system --user-group --groups spi,gpio --home-dir /var/lib/frame {user}
#          sudo /opt/frame/bin/frame install-service   (writes this unit, ExecStart set to that venv's Python)
#          sudo systemctl daemon-reload && sudo systemctl enable --now frame
# Configuration: /etc/frame/config.yaml. State: /var/lib/frame. Docs: docs/daemon.md in the repository.
[Unit]
Description=frame generative e-paper picture frame
Wants=network-online.target time-sync.target
After=network-online.target time-sync.target

[Service]
Type=notify
NotifyAccess=main
ExecStart={exec_start}
Environment=FRAME_STATE_DIR=/var/lib/frame
Environment=PYTHONUNBUFFERED=1
User={user}
Group={user}
SupplementaryGroups=spi gpio
StateDirectory=frame
StateDirectoryMode=0750
ConfigurationDirectory=frame
# The daemon pings the watchdog from its main loop every WatchdogSec/2; a hung daemon is restarted.
WatchdogSec=120
Restart=on-failure
RestartSec=10
# "Restart" on the phone's settings page: the daemon exits with 75, which restarts it and is no failure.
RestartForceExitStatus=75
SuccessExitStatus=75
# SIGTERM: the render worker stops (its last per-step checkpoint is on disk) and the daemon exits.
TimeoutStopSec=15
KillMode=mixed
# The render worker runs niced (worker.nice) and is the first choice of the kernel OOM killer
# (oom_score_adj=1000); if it is killed the daemon carries on and restarts it.
OOMPolicy=continue
Nice=0
IOWeight=50
CPUWeight=50

# Hardening: read-only system, private /tmp, no privilege gain, only the state dir is writable.
ProtectSystem=strict
ProtectHome={protect_home}
PrivateTmp=yes
NoNewPrivileges=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
RestrictNamespaces=yes
LockPersonality=yes
SystemCallArchitectures=native
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
UMask=0027
# SPI and GPIO access comes from the spi/gpio groups above (no device allow-list: node names differ
# between Pi models and kernels).

[Install]
WantedBy=multi-user.target
"""


def render_unit(exec_start: str = DEFAULT_EXEC, user: str = "frame", protect_home: str = "yes") -> str:
    return UNIT_TEMPLATE.format(exec_start=exec_start, user=user, protect_home=protect_home)


def unit_for_this_install(user: str, config_path: str | None) -> str:
    """The unit running *this* Python (``python -m frame run``), so a virtualenv install works.
    ProtectHome becomes read-only when that Python lives under /home (a venv in the owner's home)."""
    command = [sys.executable, "-m", "frame", "run"]
    if config_path:
        command += ["--config", str(Path(config_path).resolve())]
    under_home = Path(sys.executable).resolve().is_relative_to("/home") or sys.prefix.startswith("/home")
    return render_unit(shlex.join(command), user, "read-only" if under_home else "yes")
