"""The crash harness must be able to fail: its parser, its file-system model and its file rules are
checked here on calls whose outcome is known — including real traces of writers that are not safe."""

from __future__ import annotations

import copy
import os
import sys
import textwrap

import pytest

from tests.crash import checks
from tests.crash.fsmodel import Model
from tests.crash.harness import ROOT
from tests.crash.strace import Call, Fd, marks, parse, record, strace_available


def _hex(text: str) -> str:
    return "".join(f"\\x{b:02x}" for b in text.encode())


def test_parser_reads_strace_syntax(tmp_path):
    path, folder = str(tmp_path / "a.json"), str(tmp_path)
    log = tmp_path / "log"
    log.write_text("\n".join([
        f'7 openat(AT_FDCWD<{_hex("/")}>, "{_hex(path)}", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0644) = 3<{_hex(path)}>',
        f'7 write(3<{_hex(path)}>, ""..., 20 <unfinished ...>',
        f'8 fsync(4<{_hex(folder)}>) = 0',
        "7 <... write resumed>) = 20",
        " | 00000  7b 22 61 22 3a 20 31 7d  20 20 20 20 20 20 20 20  {\"a\": 1}         |",
        " | 00010  20 20 20 0a                                       ...              |",
        f'7 rename("{_hex(path)}", "{_hex(path + ".x")}") = 0',
        f'7 unlink("{_hex(path)}") = -1 ENOENT (No such file or directory)',
        "7 +++ exited with 0 +++",
        f'9 write(5<{_hex(os.devnull)}>, ""..., 27) = 27',
        " | 00000  66 72 61 6d 65 2d 63 72  61 73 68 2d 6d 61 72 6b  frame-crash-mark |",
        " | 00010  20 7b 22 65 22 3a 20 22  78 22 7d                  {\"e\": \"x\"}      |",
    ]) + "\n")
    calls = parse(log)
    assert [c.name for c in calls] == ["openat", "fsync", "write", "rename", "write"]
    assert calls[0].ret == Fd(3, path) and calls[1].args[0] == Fd(4, folder)
    assert calls[2].data == b'{"a": 1}' + b" " * 11 + b"\n"
    assert calls[3].args == [path, path + ".x"]
    assert marks(calls) == [(4, '{"e": "x"}')]


def _call(name, *args, ret=0, data=None, pid=1):
    return Call(pid, name, list(args), ret, data)


def test_models_keep_only_what_was_synced(tmp_path):
    root = tmp_path / "state"
    root.mkdir()
    folder, tmp, target = str(root / "job"), str(root / "job" / ".a.tmp-1"), str(root / "job" / "a")
    model = Model([root])
    torn = []
    model.on_write = lambda node, offset, data: torn.append(model.torn_image(node, offset, data))
    steps = [_call("mkdir", folder, "0777"),
             _call("openat", Fd(-100, "/"), tmp, "O_WRONLY|O_CREAT|O_TRUNC", ret=Fd(3, tmp)),
             _call("write", Fd(3, tmp), "", 2048, ret=2048, data=b"n" * 2048),
             _call("fsync", Fd(3, tmp)),
             _call("rename", tmp, target),
             _call("fsync", Fd(4, folder)),
             _call("fsync", Fd(5, str(root)))]
    images = []
    for index, call in enumerate(steps):
        model.apply(index, call)
        images.append({name: model.image(name) for name in ("kill", "lost", "meta")})
    assert images[2]["kill"].files[tmp] == b"n" * 2048 and images[2]["meta"].files[tmp] == bytes(2048)
    assert images[2]["lost"].files == {} and str(root / "job") not in images[2]["lost"].dirs
    assert torn[0].files[tmp] == b"n" * 1024 + bytes(1024)
    assert images[4]["meta"].files[target] == b"n" * 2048  # the data was synced before the rename
    assert images[5]["lost"].files == {}  # the folder's own entry is not on the card yet
    assert images[6]["lost"].files == {target: b"n" * 2048}


_UNSAFE = textwrap.dedent('''
    import os, sys
    from pathlib import Path
    from frame.atomicfile import fsync_dir, make_dirs, write_bytes_atomic
    root = Path(sys.argv[1])
    (root / "inplace.json").write_text("a new value, written over the old one in place")
    tmp = root / ".norename.json.tmp-1"
    tmp.write_bytes(b"synced data, renamed, folder never synced")
    fd = os.open(tmp, os.O_RDONLY); os.fsync(fd); os.close(fd)
    os.replace(tmp, root / "norename.json")
    os.mkdir(root / "newdir")  # its parent is never fsynced
    write_bytes_atomic(root / "newdir" / "job.json", b"complete, in a folder that is not")
    make_dirs(root / "gooddir")
    write_bytes_atomic(root / "gooddir" / "job.json", b"complete and durable")
    os.write(os.open(os.devnull, os.O_WRONLY), b"frame-crash-mark {}")
''')


@pytest.mark.skipif(strace_available() is not None and os.environ.get("REQUIRE_CRASH_HARNESS") != "1",
                    reason=f"{strace_available()}")
def test_the_file_rules_catch_unsafe_writers_in_a_real_trace(tmp_path):
    root = tmp_path / "state"
    root.mkdir()
    (root / "inplace.json").write_text("the old value")
    os.sync()
    model = Model([root])
    log = tmp_path / "log"
    script = tmp_path / "unsafe.py"
    script.write_text(_UNSAFE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = record([sys.executable, str(script), str(root)], log, env=env)
    assert done.returncode == 0, done.stderr
    calls = parse(log)
    ledger_model = copy.deepcopy(model)
    ledger = checks.FileLedger(ledger_model.image("kill").files)
    for index, call in enumerate(calls):
        for effect in ledger_model.apply(index, call):
            ledger.add(effect)
    ledger.finish()
    assert ledger.trace_findings() == [f"{root / 'inplace.json'} is written in place "
                                       "(not through a temporary file and a rename)"]
    findings = set()
    for index, call in enumerate(calls):
        if model.apply(index, call):
            for name in ("kill", "lost", "meta"):
                findings.update(checks.FileLedger.check(ledger, index + 1, model.image(name)))
    assert {f.split(": ")[0] for f in findings} == {
        str(root / "inplace.json"), str(root / "norename.json"), str(root / "newdir" / "job.json")}


def test_strace_is_there_when_ci_requires_the_harness():
    if os.environ.get("REQUIRE_CRASH_HARNESS") == "1":
        assert strace_available() is None, strace_available()
    else:
        pytest.skip("REQUIRE_CRASH_HARNESS is not set")
