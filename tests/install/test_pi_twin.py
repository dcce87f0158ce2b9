"""The Pi twin's pure logic (tools/pi_twin_*.py), on x86 in milliseconds: the budget, what it reads from
/proc and cgroup files, the apt sources, the unit, the schedule the phone saves, the picture tolerance."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from tests.install.pitools import ROOT, load_tool

rootfs = load_tool("pi_twin_rootfs")
memory = load_tool("pi_twin_memory")
install = load_tool("pi_twin_install")
phone = load_tool("pi_twin_phone")
twin_slice = load_tool("pi_twin_slice")
taste = load_tool("pi_twin_taste")

STATUS = "Name:\tpython3\nVmPeak:\t  40000 kB\nVmHWM:\t   23456 kB\nVmRSS:\t   20000 kB\n"


def test_budget_is_the_pi_minus_the_os_plus_qemu_per_process():
    budget = memory.budget(qemu_per_process_mib=20.5)
    assert budget.frame_mib == pytest.approx(512 - 220.4)
    assert budget.qemu_mib == pytest.approx(20.5 * 3)
    assert budget.limit_mib == pytest.approx(291.6 + 61.5)
    assert "291.6 MiB for frame" in budget.describe() and "20.5 MiB x 3 processes" in budget.describe()
    assert memory.budget(-3.0).qemu_mib == 0  # emulation never makes room
    with pytest.raises(ValueError, match="OS baseline"):
        memory.budget(10, os_baseline_mib=600)


def test_proc_and_cgroup_fields():
    assert memory.status_kib(STATUS, "VmHWM") == 23456
    assert memory.status_kib(STATUS, "VmSwap") is None
    v2_events = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n"
    v1_control = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
    assert memory.oom_kills(v2_events) == 1 and memory.oom_kills(v1_control) == 3
    assert memory.oom_kills("oom_kill_disable 0\nunder_oom 0\n") == 0


@pytest.mark.parametrize(("argv", "label"), [
    (["/usr/libexec/qemu-binfmt/aarch64-binfmt-P", "/opt/frame/bin/python", "/opt/frame/bin/python", "-m",
      "frame", "run"], "daemon"),
    (["/opt/frame/bin/python", "-m", "frame.worker.render", "/var/lib/frame/jobs/3"], "render"),
    (["/usr/bin/python3", "-m", "frame.worker.tastechild"], "tastechild"),
    (["/opt/frame/bin/frame", "run"], "daemon"),
    (["/opt/frame/bin/python", "-m", "pytest", "-q"], "pytest"),
    (["/usr/bin/env", "-i"], "env"),
])
def test_process_labels(argv, label):
    assert memory.process_label(argv) == label


def test_peak_watch_keeps_each_process_peak_and_the_largest_sum(monkeypatch, tmp_path):
    statuses = {1: "VmHWM:\t 1024 kB\nVmRSS:\t 1024 kB\n", 2: "VmHWM:\t 4096 kB\nVmRSS:\t 2048 kB\n"}
    cmdlines = {1: b"/opt/frame/bin/frame\0run\0", 2: b"python\0-m\0frame.worker.render\0"}
    real = memory.Path

    class FakeProc:
        def __init__(self, path):
            self.parts = str(path).split("/")

        def read_text(self):
            return statuses[int(self.parts[2])]

        def read_bytes(self):
            return cmdlines[int(self.parts[2])]

    monkeypatch.setattr(memory, "Path", lambda p: FakeProc(p) if str(p).startswith("/proc/") else real(p))
    alive = [1, 2]
    watch = memory.PeakWatch(lambda: alive)
    watch.poll()
    statuses[2] = "VmHWM:\t 8192 kB\nVmRSS:\t 1024 kB\n"
    watch.poll()
    alive.remove(2)  # the worker exits: its last peak stays
    watch.poll()
    assert watch.by_label() == {"daemon": (1, 1.0), "render": (1, 8.0)}
    assert watch.rss_sum_kib == 3072 and watch.most_processes == 2


def test_recipe_and_mirror_from_apt_sources():
    fields = rootfs.recipe((ROOT / "tools" / "pi-twin-rootfs.recipe").read_text())
    assert fields["suite"] == "bookworm" and fields["arch"] == "arm64" and "python3-venv" in fields["include"]
    with pytest.raises(ValueError, match="lacks include"):
        rootfs.recipe("suite bookworm\narch arm64\nvariant minbase\n")
    deb822 = ("Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n\n"
              "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n")
    assert rootfs.debian_mirror("bookworm", [("debian.sources", deb822)]) == "http://mirror.example/debian"
    one_line = "# deb http://old/ bookworm main\ndeb [arch=amd64] http://ftp.example/debian bookworm main\n"
    assert rootfs.debian_mirror("bookworm", [("sources.list", one_line)]) == "http://ftp.example/debian"
    with pytest.raises(RuntimeError, match="no Debian mirror for trixie"):
        rootfs.debian_mirror("trixie", [("debian.sources", deb822)])


def test_the_unit_frame_writes_parses():
    from frame.daemon.unit import render_unit  # the unit install-pi.sh writes, from frame itself

    unit = install.parse_unit(render_unit("/opt/frame/bin/python -m frame run", "frame"))
    assert unit.exec_start == ["/opt/frame/bin/python", "-m", "frame", "run"]
    assert (unit.user, unit.group) == ("frame", "frame")
    assert unit.environment["FRAME_STATE_DIR"] == "/var/lib/frame"
    with pytest.raises(ValueError, match="no ExecStart"):
        install.parse_unit("[Unit]\nExecStart=/bin/true\n[Service]\nUser=frame\n")


def test_the_phone_schedules_the_night_at_least_the_lead_ahead():
    fields = phone.schedule_fields(dt.datetime(2026, 12, 3, 23, 59, 10, tzinfo=dt.UTC), lead_seconds=45)
    assert fields == {"schedule.render_at": "00:00", "schedule.show_at": "00:01", "schedule.deadline": "02:00"}
    fields = phone.schedule_fields(dt.datetime(2026, 12, 3, 12, 0, 20, tzinfo=dt.UTC), lead_seconds=45)
    assert fields["schedule.render_at"] == "12:02"  # 12:01 would be 40 s away


def test_night_config_keeps_the_owners_other_settings():
    config = phone.night_config({"state_dir": "/var/lib/frame", "model": {"steps": None, "guidance": 7},
                                 "web": {"token": ""}}, 18080)
    assert config["model"] == {"steps": None, "guidance": 7, "source": "demo", "size": "256x160"}
    assert config["web"] == {"token": "", "listen": "127.0.0.1:18080"}
    assert config["display"]["panel"] == "virtual" and config["schedule"]["timezone"] == "UTC"


def test_picture_tolerance():
    reference = np.full((160, 256, 3), 100, np.uint8)
    close = reference.copy()
    close[0, :40, 0] = 101  # 40 of 122,880 values by one level: BLAS rounding
    assert twin_slice.compare(close, reference).ok
    far = reference.copy()
    far[0, 0, 0] = 103
    assert not twin_slice.compare(far, reference).ok
    noisy = reference + (np.arange(reference.size).reshape(reference.shape) % 2).astype(np.uint8)
    assert not twin_slice.compare(noisy, reference).ok  # half the values off by one
    assert not twin_slice.compare(reference[:80], reference).ok
    assert "within tolerance" in twin_slice.compare(close, reference).describe()


def test_committed_reference_is_the_twins_night():
    verdict = twin_slice.compare_with_reference((ROOT / "tests/fixtures/pi_twin/night-x86.png").read_bytes())
    assert verdict.ok and verdict.changed == 0 and verdict.values == 160 * 256 * 3


def test_pytest_summary():
    output = "....\n===== 388 passed, 1 skipped in 160.02s (0:02:40) =====\n"
    assert twin_slice.pytest_summary(output) == "388 passed, 1 skipped in 160.02s (0:02:40)"
    assert twin_slice.pytest_summary("Segmentation fault\n").startswith("no pytest summary")


def _ci_twin_stage(tmp_path, exit_code: int):
    """``.ci/run``'s Pi twin stage, run with a stand-in for the twin that exits with ``exit_code``."""
    import subprocess

    text = (ROOT / ".ci/run").read_text()
    stage = text[text.index("# The Pi twin (docs/pi-twin.md)"):]
    stage = stage[:stage.index("\n# ComfyUI's own server")]  # the next stage installs packages
    fake = tmp_path / ".venv/bin/python"
    fake.parent.mkdir(parents=True)
    fake.write_text(f"#!/bin/sh\necho twin-ran\nexit {exit_code}\n")
    fake.chmod(0o755)
    script = tmp_path / "stage.sh"
    script.write_text("set -euo pipefail\n" + stage + "echo after-twin\n")
    return subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("exit_code", [1, 2, 124])
def test_ci_fails_when_the_twin_fails(tmp_path, exit_code):
    done = _ci_twin_stage(tmp_path, exit_code)
    assert done.returncode != 0 and "twin-ran" in done.stdout and "after-twin" not in done.stdout
    assert "the Pi twin FAILED" in done.stdout


def test_ci_skips_the_twin_only_when_the_machine_cannot_run_it(tmp_path):
    done = _ci_twin_stage(tmp_path, 77)
    assert done.returncode == 0 and "skipped" in done.stdout and "after-twin" in done.stdout
    assert _ci_twin_stage(tmp_path / "ok", 0).returncode == 0


def test_the_twin_says_why_it_cannot_run_without_root(monkeypatch, capsys):
    twin = load_tool("pi_twin")
    monkeypatch.setattr(twin.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(twin.sys, "argv", ["pi_twin.py"])
    assert twin.main() == twin.CANNOT_RUN == 77
    assert "cannot run on this machine: needs root" in capsys.readouterr().err


def test_each_twin_run_has_its_own_cgroup_and_removes_only_dead_runs_ones():
    assert memory.cgroup_name(4242) != memory.cgroup_name(4243)
    assert memory.cgroup_name(4242).endswith("-4242")
    names = [memory.cgroup_name(10), memory.cgroup_name(11), "frame-pi-twin-main", "system.slice", "frame-pi-twin"]
    assert memory.stale_names(names, alive=lambda pid: pid == 11) == [memory.cgroup_name(10)]
    assert memory.stale_names(names, alive=lambda pid: True) == []


def test_the_twins_ratings_make_the_trained_model_choose(tmp_path):
    """The seed script (run on x86 here, in the rootfs by the twin) leaves a store from which the
    night's job has enough rated pictures of two kinds: the taste child runs, not the variety choice."""
    import json
    import subprocess
    import sys

    import yaml

    from frame.config import load_config
    from frame.daemon.jobs import night
    from frame.daemon.store.database import Store
    from frame.worker import choose as tastechoice

    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(taste.taste_config({"state_dir": str(tmp_path / "state")})))
    config = load_config(config_path, environ={})
    assert config.taste.explore_rate == 0  # the model chooses, every run
    plan = taste.rated_plan(config.taste.themes, config.taste.styles)
    assert len(plan) >= config.taste.min_ratings and {value for _, _, value in plan} == {1, -1}
    done = subprocess.run([sys.executable, "-c", taste.SEED_SCRIPT, str(config_path), json.dumps(plan)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    store = Store.open(tmp_path / "state")
    try:
        job = night.build_job(night.RenderContext(config, store, tmp_path / "state"), 1, "now")
        files = [p.file for p in store.pictures(limit=50)]
    finally:
        store.close()
    assert job.choice is None and len(job.history) == len(plan)
    ratings = [tastechoice.to_rating(p) for p in job.history]
    assert tastechoice.picker_for(config, None).uses_model(ratings)
    assert all((tmp_path / "state" / "gallery" / name).is_file() for name in files)
    with pytest.raises(ValueError, match="two themes"):
        taste.rated_plan(["one theme"], ["oil"])


@pytest.mark.parametrize(("why", "problem"), [
    ({"method": "taste (model)", "sentence": "expected liking 0.75", "plot": "why.png"}, None),
    ({"method": "taste (model)", "plot": None, "plot_note": "No plot tonight: one class"}, None),
    ({"method": "taste (variety)", "plot": None}, "chosen by 'taste (variety)'"),
    ({"method": "queue"}, "not 'taste (model)'"),
    ({"method": "taste (model)", "plot": None}, "neither drew a plot"),
    (None, "no why"),
])
def test_the_taste_night_passes_only_when_the_trained_model_chose(why, problem):
    found = taste.taste_problem(why)
    assert (found is None) if problem is None else (problem in found)
