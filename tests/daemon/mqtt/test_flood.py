"""10,000 junk messages on the command topics of the real daemon process (``frame run``): its memory and
CPU stay within the daemon's budget (docs/daemon.md: RSS at most 60 MiB, peak at most 80), it keeps
answering, and a crash leaves the broker saying ``offline`` (the last will)."""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path

from frame.daemon.mqtt.topics import COMMANDS
from tests.daemon.daemonproc import DaemonProcess, cpu_seconds, write_config
from tests.daemon.mqtt.homeassistant import HomeAssistant

JUNK = 10_000
PEAK_BUDGET_MIB = 80.0  # docs/daemon.md, the daemon's peak over a whole night
GROWTH_BUDGET_MIB = 8.0  # what the flood may add to the peak: paho's buffers, the inbox, the answers
CPU_BUDGET_SECONDS = 20.0  # 10,000 messages on a loaded, shared 2-core machine; 0.5 s measured


def _status_mib(pid: int, field: str) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", text, re.M).group(1)) / 1024


def _children_cpu(pid: int) -> float:
    """CPU of the daemon's finished children (the check child that looks at each queued prompt)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def _junk(rng: random.Random, i: int) -> bytes:
    kind = i % 5
    if kind == 0:
        return rng.randbytes(rng.randrange(0, 64))
    if kind == 1:
        return rng.randbytes(rng.randrange(2049, 8192))  # over the cap
    if kind == 2:
        return "".join(rng.choice("ONOFFPRESSlikeauto ") for _ in range(rng.randrange(1, 12))).encode() + b"!"
    if kind == 3:
        return ("\u202e" * rng.randrange(1, 300)).encode()
    return b"{\"rating\": " + str(rng.randrange(-10**6, 10**6)).encode() + b"}"


def test_ten_thousand_junk_messages_stay_within_the_daemons_budget(tmp_path, broker):
    config, url = write_config(tmp_path, mqtt={"host": "127.0.0.1", "port": broker.port})
    daemon = DaemonProcess(config, url)
    ha = HomeAssistant(broker.port)
    try:
        ha.wait_for(lambda: ha.retained.get("frame/availability") == b"online", what="the frame online")
        ha.wait_for(lambda: ha.state(), what="the first state")
        pid = daemon.proc.pid
        peak_before, cpu_before, children_before = _status_mib(pid, "VmHWM"), cpu_seconds(pid), _children_cpu(pid)
        rng, started = random.Random(42), time.monotonic()
        commands = [c for c in COMMANDS if c != "paint"] + ["nope", "paint/x", "%00"]
        sent = 0
        for i in range(JUNK):
            name = commands[i % len(commands)]
            info = ha.client.publish(f"frame/cmd/{name}", _junk(rng, i), qos=i % 2)
            sent += 1
            if i % 500 == 499:
                info.wait_for_publish(10)
        info.wait_for_publish(10)
        time.sleep(3)  # the daemon works through what the broker delivered
        assert daemon.get("/api/status").status_code == 200
        answer = ha.command("rate", "like", timeout=30)  # still answering, through a flood's rate limit
        assert answer == {"command": "rate", "ok": False, "message": "no picture has been shown yet, nothing to rate"}
        peak, rss, cpu = _status_mib(pid, "VmHWM"), _status_mib(pid, "VmRSS"), cpu_seconds(pid) - cpu_before
        print(f"junk flood: {sent} messages, VmHWM {peak_before:.1f} -> {peak:.1f} MiB, RSS {rss:.1f} MiB, "
              f"CPU {cpu:.2f} s (its children {_children_cpu(pid) - children_before:.2f} s), "
              f"{len(ha.answers())} answers")
        assert peak <= PEAK_BUDGET_MIB and peak - peak_before <= GROWTH_BUDGET_MIB
        assert cpu <= CPU_BUDGET_SECONDS
        # text on the prompt topic is a prompt, but only as many as the rate limit lets through
        queued = len(daemon.get("/api/prompts").json()["prompts"])
        assert queued <= 20 + 5 * (time.monotonic() - started), queued
        log = Path(daemon.log.name).read_text(errors="replace")
        assert "Traceback" not in log
        assert log.count("mqtt: prompt refused") < 200  # the rate limit bounds the log too
        daemon.kill()  # no clean stop: the broker publishes the last will
        ha.wait_for(lambda: ha.retained.get("frame/availability") == b"offline", timeout=90, what="the last will")
    finally:
        ha.close()
        daemon.kill()
