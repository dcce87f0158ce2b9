import errno
import os
import stat
import threading

import pytest

from frame import atomicfile


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "picture.png"
    atomicfile.write_bytes_atomic(path, b"old")
    real_write = os.write

    def full_disk(fd, data):
        real_write(fd, bytes(data[:3]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomicfile.os, "write", full_disk)
    with pytest.raises(OSError) as info:
        atomicfile.write_bytes_atomic(path, b"new picture bytes")
    assert info.value.errno == errno.ENOSPC
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["picture.png"]


def test_mode_is_applied_less_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        atomicfile.write_bytes_atomic(tmp_path / "token", b"secret", mode=0o600)
        atomicfile.write_bytes_atomic(tmp_path / "state", b"{}", mode=0o666)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "token").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o644


def test_concurrent_writers_of_one_path_each_leave_a_whole_file(tmp_path):
    path = tmp_path / "care.json"
    payloads = [bytes([65 + i]) * (1000 * (i + 1)) for i in range(8)]
    threads = [threading.Thread(target=atomicfile.write_bytes_atomic, args=(path, p)) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert path.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["care.json"]


def test_stale_temporaries_finds_only_this_files_leftovers(tmp_path):
    path = tmp_path / "render-state.bin"
    mine = tmp_path / f".render-state.bin.tmp-{os.getpid()}-1"
    other = tmp_path / ".other.bin.tmp-1-1"
    for leftover in (mine, other):
        leftover.write_bytes(b"torn")
    assert atomicfile.stale_temporaries(path) == [mine]


def test_fsync_dir_of_a_missing_folder_is_a_no_op(tmp_path):
    atomicfile.fsync_dir(tmp_path / "gone")


def test_private_file_is_exactly_0600_whatever_the_umask_and_the_old_mode(tmp_path):
    path = tmp_path / "web-secret"
    path.write_bytes(b"old")
    path.chmod(0o644)
    old = os.umask(0o277)  # would leave the owner without write permission
    try:
        atomicfile.write_private_atomic(path, b"key")
    finally:
        os.umask(old)
    assert path.read_bytes() == b"key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_make_dirs_fsyncs_the_parent_of_every_folder_it_creates(tmp_path, monkeypatch):
    from tests.fsyncspy import record_fsyncs

    (tmp_path / "state").mkdir()
    synced = record_fsyncs(monkeypatch)
    atomicfile.make_dirs(tmp_path / "state" / "checkpoints" / "render-1")
    assert (tmp_path / "state" / "checkpoints" / "render-1").is_dir()
    assert synced == [str(tmp_path / "state"), str(tmp_path / "state" / "checkpoints")]
    synced.clear()
    atomicfile.make_dirs(tmp_path / "state" / "checkpoints" / "render-1")  # exists: nothing to sync
    assert synced == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError):
        atomicfile.make_dirs(tmp_path / "file" / "sub")


def test_remove_tree_fsyncs_the_parent_after_removing(tmp_path, monkeypatch):
    from tests.fsyncspy import record_fsyncs

    folder = tmp_path / "checkpoints" / "render-1"
    (folder / "diffusion").mkdir(parents=True)
    (folder / "job.json").write_text("{}")
    synced = record_fsyncs(monkeypatch)
    atomicfile.remove_tree(folder)
    assert not folder.exists() and synced == [str(tmp_path / "checkpoints")]
    atomicfile.remove_tree(folder)  # already gone: not an error


def test_replace_durably_fsyncs_the_folder_after_the_rename(tmp_path, monkeypatch):
    from tests.fsyncspy import record_fsyncs

    (tmp_path / "a.tmp").write_text("new")
    synced = record_fsyncs(monkeypatch)
    atomicfile.replace_durably(tmp_path / "a.tmp", tmp_path / "a")
    assert (tmp_path / "a").read_text() == "new" and synced == [str(tmp_path)]
