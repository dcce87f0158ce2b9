"""``frame render --out FILE``: owners script it, so the file is replaced whole or not at all (issue 19),
its folder is checked before the render and it is written in the format its extension names (issue 13).

``render_command`` writes its picture with ``pngmeta.save_image``; these tests pin that writer."""

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


# --- frame render --out: checked before the render, written in the format its extension names ---------

@pytest.fixture(autouse=True)
def no_user_config(monkeypatch):
    monkeypatch.delenv("FRAME_CONFIG", raising=False)


def _render_args(tmp_path, out, *extra):
    from tests.diffusion.test_commands import parse

    noise = tmp_path / "noise.npy"
    np.save(noise, np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32))
    return parse(["render", "--prompt", "a lighthouse", "--steps", "1", "--guidance", "0", "--size", "32x32",
                  "--seed", "5", "--init-noise", str(noise), "--out", str(out), *extra])


@pytest.fixture
def no_render(monkeypatch):
    """Fail the test if the command gets as far as loading the model."""
    from frame.diffusion import pipeline

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before --out was checked")

    monkeypatch.setattr(pipeline, "load_pipeline", refuse)


@pytest.mark.parametrize("where, message", [
    ("missing/x.png", "the folder .*missing does not exist"),
    ("a-file/x.png", "the folder .*a-file is not a folder"),
    ("a-folder", "is a folder; name a file in it"),
    ("/sys/frame-render-test.png", "cannot write into /sys"),
    ("x.gif", "has extension '.gif'; frame writes .png, .jpg/.jpeg or .webp"),
    ("x", "has no extension; frame writes .png"),
])
def test_a_bad_out_path_is_refused_before_the_render(tmp_path, no_render, where, message):
    from frame.errors import UsageError

    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "a-folder.png").mkdir()
    out = where if where.startswith("/") else tmp_path / (where + (".png" if where == "a-folder" else ""))
    args = _render_args(tmp_path, out)
    with pytest.raises(UsageError, match=message):
        args.func(args)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "a-folder.png", "noise.npy"]


def test_a_bad_save_latents_path_is_refused_before_the_render(tmp_path, no_render):
    from frame.errors import UsageError

    args = _render_args(tmp_path, tmp_path / "x.png", "--save-latents", str(tmp_path / "no" / "l.npy"))
    with pytest.raises(UsageError, match="--save-latents .*does not exist"):
        args.func(args)


@pytest.mark.parametrize("name, fmt", [("x.png", "PNG"), ("x.jpg", "JPEG"), ("X.JPEG", "JPEG"), ("x.webp", "WEBP")])
def test_out_is_written_in_the_format_its_extension_names(tmp_path, name, fmt):
    args = _render_args(tmp_path, tmp_path / name)
    assert args.func(args) == 0
    with Image.open(tmp_path / name) as picture:
        assert picture.format == fmt and picture.size == (32, 32)
        if fmt == "PNG":
            text = picture.info["parameters"]
        else:  # A1111 reads JPEG/WebP parameters from the EXIF UserComment
            comment = picture.getexif().get_ifd(0x8769)[0x9286]
            assert comment.startswith(b"UNICODE\0")
            text = comment[8:].decode("utf-16-be")
    assert text.startswith("a lighthouse\n") and "Seed: 5, Size: 32x32" in text
