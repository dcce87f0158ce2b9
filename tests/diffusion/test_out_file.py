"""``frame render --out FILE``: owners script it, so the file is replaced whole or not at all (issue 19).

``render_command`` writes its picture with ``pngmeta.save_png``; these tests pin that writer."""

from __future__ import annotations

import io
import os
import resource
import signal
import stat

import numpy as np
import pytest
from PIL import Image

from frame.diffusion.pngmeta import save_png
from tests.fsyncspy import record_fsyncs


def _noise(size=64):
    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8))


def test_a_full_disk_mid_write_keeps_the_previous_picture(tmp_path):
    out = tmp_path / "tonight.png"
    _noise(8).save(out)
    before = out.read_bytes()
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 1000, limits[1]))  # the new PNG is ~12 kB
    try:
        with pytest.raises(OSError):
            save_png(_noise(), out, "a lighthouse")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert out.read_bytes() == before
    assert os.listdir(tmp_path) == ["tonight.png"]


def test_the_picture_is_synced_under_a_temporary_name_then_renamed(tmp_path, monkeypatch):
    out = tmp_path / "tonight.png"
    synced = record_fsyncs(monkeypatch)
    old = os.umask(0o022)
    try:
        save_png(_noise(), out, "a lighthouse")
    finally:
        os.umask(old)
    assert "/.tonight.png.tmp-" in synced[0] and synced[1:] == [str(tmp_path)]
    with Image.open(io.BytesIO(out.read_bytes())) as picture:
        assert picture.info["parameters"] == "a lighthouse" and picture.size == (64, 64)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644  # as open() would have created it


def test_a_symlinked_out_path_replaces_the_link_target(tmp_path):
    target = tmp_path / "shared" / "frame.png"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "latest.png"
    link.symlink_to(target)
    save_png(_noise(), link)
    assert link.is_symlink() and target.read_bytes().startswith(b"\x89PNG")


def test_a_pipe_out_path_is_written_directly(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        save_png(_noise(4), fifo)
        assert os.read(reader, 8) == b"\x89PNG\r\n\x1a\n"
    finally:
        os.close(reader)
