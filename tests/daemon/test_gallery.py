import errno

import pytest

from frame.daemon import gallery, statefile
from frame.errors import FrameError
from tests.daemon.conftest import add_picture


def _outputs(tmp_path):
    image, panel = tmp_path / "image.png", tmp_path / "panel.png"
    image.write_bytes(b"I" * 1000)
    panel.write_bytes(b"P" * 500)
    return image, panel


def test_publish_copies_files_and_records(tmp_path, store):
    image, panel = _outputs(tmp_path)
    pid = gallery.publish(store, tmp_path, 4, image, panel, {"prompt": "fox", "seed": 3})
    picture = store.picture(pid)
    assert picture["bytes"] == 1500 and picture["prompt"] == "fox"
    assert gallery.picture_path(tmp_path, picture["file"]).read_bytes() == b"I" * 1000
    assert gallery.picture_path(tmp_path, picture["panel_file"]).read_bytes() == b"P" * 500


def test_publish_on_full_disk_records_nothing_and_leaves_no_files(tmp_path, store, monkeypatch):
    image, panel = _outputs(tmp_path)
    calls = []

    def write(path, data, mode=0o644):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data, mode)

    real = statefile.write_bytes_atomic
    monkeypatch.setattr(gallery, "write_bytes_atomic", write)
    with pytest.raises(FrameError, match="No space left"):
        gallery.publish(store, tmp_path, 4, image, panel, {"prompt": "fox"})
    assert store.count_pictures() == 0
    assert list(gallery.gallery_dir(tmp_path).iterdir()) == []


def test_picture_path_refuses_escape(tmp_path):
    with pytest.raises(FrameError):
        gallery.picture_path(tmp_path, "../frame.db")
    assert gallery.picture_path(tmp_path, None) is None


def test_retention_keeps_favourites_and_shown(tmp_path, store):
    folder = gallery.gallery_dir(tmp_path)
    folder.mkdir()
    ids = []
    for n in range(6):
        (folder / f"{n}.png").write_bytes(b"x" * 100)
        ids.append(add_picture(store, file=f"{n}.png", bytes=100))
    store.rate(ids[0], "stars", 5)
    store.rate(ids[1], "thumb", 1)
    store.rate(ids[2], "thumb", -1)
    deleted = gallery.apply_retention(store, tmp_path, gallery.Retention(max_pictures=3, max_disk_mb=10),
                                      keep={ids[3]})
    assert deleted == [ids[2], ids[4], ids[5]]
    remaining = {p["id"] for p in store.pictures()}
    assert remaining == {ids[0], ids[1], ids[3]}
    assert not (folder / "2.png").exists() and (folder / "0.png").exists()


def test_retention_by_disk_size(tmp_path, store):
    for n in range(4):
        add_picture(store, file=f"{n}.png", bytes=400 * 1024)
    deleted = gallery.apply_retention(store, tmp_path, gallery.Retention(max_pictures=100, max_disk_mb=1))
    assert len(deleted) == 2 and store.count_pictures() == 2
