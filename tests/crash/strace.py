"""Recording the file-system calls of a real run: ``strace`` (ptrace) around a child process.

Why strace and not a Python recording layer: the writes that matter most are made by C code a Python
layer cannot see — SQLite's pager and WAL (``pwrite64``/``fdatasync`` on ``frame.db``, ``-wal``,
``-journal``, the directory syncs it does itself), Pillow, ``shutil``'s ``sendfile`` — and by the
render worker, a second process. Python's ``sqlite3`` has no VFS hook, so only the kernel boundary
sees every byte in order. This is also how ALICE records applications. It stays fast because
``--seccomp-bpf`` stops the traced processes only on the listed calls (a small night runs in about
the same wall time traced as untraced), ``-s 0`` keeps read buffers out of the log and
``-e write=all`` dumps every written byte in full; ``-y`` names the file behind each descriptor and
``-xx`` hex-escapes every string, so any file name parses.

The parser turns the log into ``Call`` records (one per successful call, in the order strace saw them
complete); ``fsmodel`` gives them file-system meaning. Calls that fail are dropped: they changed nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

SYSCALLS = (
    "open,openat,creat,read,readv,lseek,write,writev,pwrite64,pwritev,pwritev2,ftruncate,truncate,fallocate,"
    "fsync,fdatasync,sync,syncfs,rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,rmdir,link,linkat,"
    "sendfile,copy_file_range,chdir,fchdir"
)
MARK_PREFIX = b"frame-crash-mark "


class TraceError(RuntimeError):
    """The log holds a call the model cannot interpret faithfully (the harness refuses to guess)."""


@dataclass(frozen=True)
class Fd:
    """A descriptor argument as ``-y`` prints it: its number and the path it referred to at the call."""

    num: int
    path: str | None


@dataclass
class Call:
    pid: int
    name: str
    args: list
    ret: int | Fd
    data: bytes | None = None  # the bytes a write-like call wrote (``-e write=all``)
    chunks: list[bytes] = field(default_factory=list)


def strace_available() -> str | None:
    """None when strace can trace a child here, else the reason it cannot."""
    exe = shutil.which("strace")
    if exe is None:
        return "strace is not installed (apt-get install strace)"
    probe = subprocess.run([exe, "-f", "--seccomp-bpf", "-qq", "-e", "trace=fsync", "-o", os.devnull, "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"strace cannot trace here: {probe.stderr.strip()[:200]}"
    return None


def record(command: list[str], log: Path, *, env: dict | None = None, cwd: Path | None = None,
           timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``command`` (and every process it starts) under strace, writing the log to ``log``."""
    argv = ["strace", "-f", "--seccomp-bpf", "-qq", "-y", "-s", "0", "-xx", "-e", "write=all",
            "-e", f"trace={SYSCALLS}", "-o", str(log), *command]
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


_HEX = re.compile(r"(?:\\x[0-9a-f]{2})+")
_LINE = re.compile(r"^(\d+) +(.*)$")
_CALL = re.compile(r"^([a-z0-9_]+)\((.*)\) += (.*)$")
_DUMP = re.compile(r"^ \| ([0-9a-f]+)  (.{1,48})")
_FD = re.compile(r"^(-?\d+|AT_FDCWD)(?:<(.*)>)?$")
_RET = re.compile(r"^(-?\d+|0x[0-9a-f]+)(?:<(.*)>)?(?: .*)?$")


def _unhex(text: str) -> str:
    return os.fsdecode(bytes.fromhex(text.replace("\\x", "")))


def _split_args(text: str) -> list[str]:
    parts, depth, start, quoted = [], 0, 0, False
    for i, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif char in "[{(<":
            depth += 1
        elif char in "]})>":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text.strip():
        parts.append(text[start:].strip())
    return parts


def _arg(text: str) -> object:
    if text.startswith('"'):
        return _unhex(text.split('"')[1]) if '"' in text[1:] else ""
    match = _FD.match(text)
    if match and match.group(2) is not None:
        num = -100 if match.group(1) == "AT_FDCWD" else int(match.group(1))
        return Fd(num, _unhex(match.group(2)) if match.group(2) else None)
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _ret(text: str) -> int | Fd | None:
    match = _RET.match(text.strip())
    if not match:
        return None
    value = int(match.group(1), 0)
    if value < 0:
        return None
    return Fd(value, _unhex(match.group(2))) if match.group(2) else value


def parse(log: Path) -> list[Call]:
    """The successful calls in ``log`` in completion order, with written data attached."""
    calls: list[Call] = []
    pending: dict[int, str] = {}
    last: Call | None = None
    with open(log, encoding="ascii", errors="replace") as handle:
        for raw in handle:
            line = raw.rstrip("\n")
            if line.startswith(" | "):
                match = _DUMP.match(line)
                if match and last is not None:
                    chunk = bytes.fromhex("".join(re.findall(r"[0-9a-f]{2}", match.group(2))))
                    last.data = (last.data or b"") + chunk
                continue
            if line.startswith(" * "):
                continue
            match = _LINE.match(line)
            if not match:
                continue
            pid, body = int(match.group(1)), match.group(2)
            if body.endswith("<unfinished ...>"):
                pending[pid] = body[: -len("<unfinished ...>")].rstrip()
                last = None
                continue
            resumed = re.match(r"^<\.\.\. [a-z0-9_]+ resumed>(.*)$", body)
            if resumed:
                body = pending.pop(pid, "") + resumed.group(1)
            if body.startswith(("+++", "---")):
                continue
            call = _parse_call(pid, body)
            last = call
            if call is not None:
                calls.append(call)
    return calls


def _parse_call(pid: int, body: str) -> Call | None:
    match = _CALL.match(body)
    if not match:
        return None
    ret = _ret(match.group(3))
    if ret is None:
        return None
    return Call(pid, match.group(1), [_arg(a) for a in _split_args(match.group(2))], ret)


def marks(calls: list[Call]) -> list[tuple[int, str]]:
    """Scenario markers (writes of ``MARK_PREFIX ...`` to /dev/null) with their position in ``calls``."""
    found = []
    for index, call in enumerate(calls):
        if call.name == "write" and call.data and call.data.startswith(MARK_PREFIX):
            found.append((index, call.data[len(MARK_PREFIX):].decode()))
    return found
