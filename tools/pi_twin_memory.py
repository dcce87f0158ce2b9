"""The Pi twin's memory side: the budget, one memory cgroup (v1 or v2), and each process's peak.

Used by tools/pi_twin.py. Pure logic (the budget, parsing /proc and cgroup files) is separate from
what touches the machine, so tests/install/test_pi_twin.py checks it on x86 in milliseconds.

The budget is what a Raspberry Pi Zero 2 W leaves for frame: 512 MiB of RAM minus what Raspberry Pi
OS Lite itself holds at idle. The published figure used (docs.printercow.com/guide/32bit-vs-64bit.html,
May 2025: 64-bit Raspberry Pi OS Lite bookworm on a Pi Zero 2 W, `top` after boot) is 291.6 MiB
"avail Mem" of 417.0 MiB total: firmware/GPU, the kernel, CMA and the idle OS keep 220.4 MiB of the
512. So frame's processes together get 291.6 MiB, not the 430 MB a naive "512 minus 80" gives.

qemu-user adds its own memory to every emulated process (its translation cache and the guest's
address-space bookkeeping). The twin measures it (the same idle interpreter emulated and native,
VmHWM) and adds it explicitly, once per process frame runs at a time, and prints both parts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MIB = 1024 * 1024
PI_RAM_MIB = 512.0
# 512 MiB minus 64-bit Raspberry Pi OS Lite's "avail Mem" at idle on a Zero 2 W (291.6 MiB, see above)
OS_BASELINE_MIB = 220.4
# The twin's cgroup is CGROUP_PREFIX-<pid of the twin>: two twins on one machine do not share one
CGROUP_PREFIX = "frame-pi-twin"
# What runs at once by design: the daemon, the render worker and one short child (taste, show, ...)
CONCURRENT_PROCESSES = 3


@dataclass(frozen=True)
class Budget:
    """Memory for all of frame's processes together, and the emulation allowance added to it."""

    frame_mib: float
    qemu_per_process_mib: float
    processes: int = CONCURRENT_PROCESSES

    @property
    def qemu_mib(self) -> float:
        return self.qemu_per_process_mib * self.processes

    @property
    def limit_mib(self) -> float:
        return self.frame_mib + self.qemu_mib

    def describe(self) -> str:
        return (f"budget {self.limit_mib:.1f} MiB = {PI_RAM_MIB:.0f} MiB Pi RAM - {PI_RAM_MIB - self.frame_mib:.1f} "
                f"MiB Raspberry Pi OS Lite idle = {self.frame_mib:.1f} MiB for frame, + qemu-user "
                f"{self.qemu_per_process_mib:.1f} MiB x {self.processes} processes = {self.qemu_mib:.1f} MiB")


def budget(qemu_per_process_mib: float, os_baseline_mib: float = OS_BASELINE_MIB,
           processes: int = CONCURRENT_PROCESSES) -> Budget:
    if not 0 <= os_baseline_mib < PI_RAM_MIB:
        raise ValueError(f"the OS baseline must be 0 to {PI_RAM_MIB:.0f} MiB, got {os_baseline_mib}")
    return Budget(PI_RAM_MIB - os_baseline_mib, max(0.0, qemu_per_process_mib), processes)


def status_kib(text: str, key: str) -> int | None:
    """A ``kB`` field (VmHWM, VmRSS) from the text of /proc/PID/status; None when absent."""
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def oom_kills(text: str) -> int:
    """The ``oom_kill`` count from cgroup v2 ``memory.events`` or v1 ``memory.oom_control``."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "oom_kill":
            return int(parts[1])
    return 0


def process_label(cmdline: list[str]) -> str:
    """A short name for a frame process from its argv. Under qemu-user (binfmt_misc) the host argv is
    the interpreter, the guest binary's path, then the guest's own argv."""
    if cmdline and ("qemu" in cmdline[0] or "binfmt" in cmdline[0]):
        cmdline = cmdline[2:]
    if "-m" in cmdline:
        module = cmdline[cmdline.index("-m") + 1] if cmdline.index("-m") + 1 < len(cmdline) else ""
        if module.startswith("frame.worker."):
            return module.removeprefix("frame.worker.")
        if module == "pytest":
            return "pytest"
        if module == "frame" and "run" in cmdline:
            return "daemon"
    if any(arg.endswith("/frame") for arg in cmdline[:2]) and "run" in cmdline:
        return "daemon"
    return os.path.basename(cmdline[0]) if cmdline else "?"


def cgroup_name(pid: int) -> str:
    """The memory cgroup of the twin run ``pid``: one per run, so two twins never share a limit or a peak."""
    return f"{CGROUP_PREFIX}-{pid}"


def stale_names(names: list[str], alive: Callable[[int], bool]) -> list[str]:
    """Twin cgroups among ``names`` whose twin run (the pid in the name) is gone: a run killed before its
    cleanup leaves its cgroup (and maybe processes) behind. Other names, and live runs', are kept."""
    stale = []
    for name in names:
        pid = name.removeprefix(CGROUP_PREFIX + "-")
        if name.startswith(CGROUP_PREFIX + "-") and pid.isdigit() and not alive(int(pid)):
            stale.append(name)
    return stale


def pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


@dataclass
class Cgroup:
    """One memory cgroup: v2 (``memory.max``) or v1 (``memory.limit_in_bytes``), with swap off."""

    path: Path
    version: int

    @staticmethod
    def available() -> bool:
        """Whether this machine has a memory cgroup of either version to create one in."""
        v2 = Path("/sys/fs/cgroup/cgroup.controllers")
        v1 = Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")
        return (v2.exists() and "memory" in v2.read_text()) or v1.exists()

    @staticmethod
    def parent() -> tuple[Path, int]:
        """Where memory cgroups are made here, and the cgroup version."""
        v2_root = Path("/sys/fs/cgroup")
        if (v2_root / "cgroup.controllers").exists() and "memory" in (v2_root / "cgroup.controllers").read_text():
            return v2_root, 2
        if Path("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists():
            return Path("/sys/fs/cgroup/memory"), 1
        raise RuntimeError("no memory cgroup here (neither v2 memory.max nor v1 memory.limit_in_bytes)")

    @classmethod
    def stale(cls) -> list[Cgroup]:
        """The cgroups of twin runs that are gone (``stale_names``), to remove."""
        parent, version = cls.parent()
        names = [entry.name for entry in parent.iterdir() if entry.is_dir()]
        return [cls(parent / name, version) for name in stale_names(names, pid_alive)]

    @classmethod
    def create(cls, name: str, limit_mib: float) -> Cgroup:
        parent, version = cls.parent()
        group = cls(parent / name, version)
        group.remove()
        group.path.mkdir()
        group.limit(limit_mib)
        return group

    def _write(self, name: str, value: str) -> None:
        (self.path / name).write_text(value)

    def _read(self, name: str) -> str:
        return (self.path / name).read_text()

    def limit(self, limit_mib: float) -> None:
        limit = str(int(limit_mib * MIB))
        if self.version == 2:
            self._write("memory.max", limit)
            self._write("memory.swap.max", "0")
            return
        self._write("memory.limit_in_bytes", limit)
        if (self.path / "memory.memsw.limit_in_bytes").exists():  # RAM + swap = RAM: no swap
            self._write("memory.memsw.limit_in_bytes", limit)
        self._write("memory.swappiness", "0")

    def swap_off(self) -> str:
        if self.version == 2:
            return "memory.swap.max = " + self._read("memory.swap.max").strip()
        if (self.path / "memory.memsw.limit_in_bytes").exists():
            return "memory.memsw.limit_in_bytes = memory.limit_in_bytes"
        return "memory.swappiness = 0 (no memsw accounting on this kernel)"

    def add(self, pid: int) -> None:
        self._write("cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        return [int(pid) for pid in self._read("cgroup.procs").split()]

    def peak_mib(self) -> float:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        return int(self._read(name)) / MIB

    def reset_peak(self) -> None:
        if self.version == 1:
            self._write("memory.max_usage_in_bytes", "0")
        elif (self.path / "memory.peak").exists():
            try:
                self._write("memory.peak", "reset")  # kernels >= 6.12; older ones keep the running peak
            except OSError:
                pass

    def oom_kills(self) -> int:
        return oom_kills(self._read("memory.events" if self.version == 2 else "memory.oom_control"))

    def kill_all(self) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass

    def remove(self) -> None:
        if not self.path.exists():
            return
        self.kill_all()
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


@dataclass
class PeakWatch:
    """Polls /proc for the processes ``pids()`` names (the cgroup's) and keeps each one's VmHWM (its
    own peak) and the largest sum of VmRSS seen at one time (an upper bound, for information: pages
    shared between processes, such as libpython, count once per process; the cgroup's charge counts
    them once and is what the budget is checked against). A process's last VmHWM reading is kept
    after it exits (short children: the poll interval bounds what is missed)."""

    pids: Callable[[], list[int]]
    peaks: dict[int, tuple[str, int]] = field(default_factory=dict)
    rss_sum_kib: int = 0
    most_processes: int = 0

    def poll(self) -> None:
        total, alive = 0, 0
        for pid in self.pids():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            hwm, rss = status_kib(status, "VmHWM"), status_kib(status, "VmRSS")
            if hwm is None or rss is None:  # a zombie or a kernel thread
                continue
            label = process_label([arg for arg in cmdline if arg])
            if label in ("chroot", "sh", "bash", "env", "sleep"):
                continue
            alive += 1
            total += rss
            known = self.peaks.get(pid)
            self.peaks[pid] = (label, max(hwm, known[1] if known else 0))
        self.rss_sum_kib = max(self.rss_sum_kib, total)
        self.most_processes = max(self.most_processes, alive)

    def by_label(self) -> dict[str, tuple[int, float]]:
        """Per kind of process: how many ran and the largest peak (MiB)."""
        kinds: dict[str, tuple[int, float]] = {}
        for label, hwm in self.peaks.values():
            count, peak = kinds.get(label, (0, 0.0))
            kinds[label] = (count + 1, max(peak, hwm / 1024))
        return kinds


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (from /proc/PID/stat parents): a native run's "cgroup"."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        found += frontier
    return found
