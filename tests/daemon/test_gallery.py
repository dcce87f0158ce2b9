import errno

import pytest

from frame import statefile
from frame.daemon.store import gallery
from frame.errors import FrameError
from frame.worker.events import PictureMeta
from tests.daemon.conftest import add_picture


def _outputs(tmp_path):
    image, panel = tmp_path / "image.png", tmp_path / "panel.png"
    image.write_bytes(b"I" * 1000)
    panel.write_bytes(b"P" * 500)
    return image, panel


def _meta(prompt, seed=1):
    return PictureMeta(prompt=prompt, negative_prompt="", theme="", style="", origin="", seed=seed, sampler=None,
                       steps=None, guidance=None, width=None, height=None, model=None, why=None)


def test_publish_copies_files_and_records(tmp_path, store):
    image, panel = _outputs(tmp_path)
    pid = gallery.publish(store, tmp_path, 4, image, panel, _meta(prompt="fox", seed=3))
    picture = store.picture(pid)
    assert picture.bytes == 1500 and picture.prompt == "fox"
    assert gallery.picture_path(tmp_path, picture.file).read_bytes() == b"I" * 1000
    assert gallery.picture_path(tmp_path, picture.panel_file).read_bytes() == b"P" * 500


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
        gallery.publish(store, tmp_path, 4, image, panel, _meta(prompt="fox"))
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
    remaining = {p.id for p in store.pictures()}
    assert remaining == {ids[0], ids[1], ids[3]}
    assert not (folder / "2.png").exists() and (folder / "0.png").exists()


def test_retention_by_disk_size(tmp_path, store):
    for n in range(4):
        add_picture(store, file=f"{n}.png", bytes=400 * 1024)
    deleted = gallery.apply_retention(store, tmp_path, gallery.Retention(max_pictures=100, max_disk_mb=1))
    assert len(deleted) == 2 and store.count_pictures() == 2


def _gallery_of(tmp_path, store, count):
    folder = gallery.gallery_dir(tmp_path)
    folder.mkdir(exist_ok=True)
    ids = []
    for _ in range(count):
        render_id = store.start_render("now", None)
        names = (f"2026-r{render_id}.png", f"2026-r{render_id}-panel.png")
        for name in names:
            (folder / name).write_bytes(b"x" * 100)
        ids.append(add_picture(store, file=names[0], panel_file=names[1], bytes=200))
        store.finish_render(render_id, "done", picture_id=ids[-1])
    return folder, ids


def test_retention_deletes_the_record_before_the_files(tmp_path, store, monkeypatch):
    """A cut between the two must leave files without a record, never a record without its files."""
    folder, ids = _gallery_of(tmp_path, store, 3)

    def cut(picture_id, **options):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(store, "delete_picture", cut)
    with pytest.raises(KeyboardInterrupt):
        gallery.apply_retention(store, tmp_path, gallery.Retention(max_pictures=2, max_disk_mb=10))
    for picture in store.pictures():
        assert (folder / picture.file).exists() and (folder / picture.panel_file).exists()


def test_files_left_by_a_cut_after_the_record_are_removed_by_the_next_retention(tmp_path, store, monkeypatch):
    folder, ids = _gallery_of(tmp_path, store, 3)
    real_unlink = type(folder).unlink

    def cut(path, missing_ok=False):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(type(folder), "unlink", cut)
    with pytest.raises(KeyboardInterrupt):
        gallery.apply_retention(store, tmp_path, gallery.Retention(max_pictures=2, max_disk_mb=10))
    monkeypatch.setattr(type(folder), "unlink", real_unlink)
    assert store.picture(ids[0]) is None and (folder / "2026-r1.png").exists()
    (folder / "2026-r99.png").write_bytes(b"not ours to delete")  # e.g. newer than a restored backup
    assert gallery.apply_retention(store, tmp_path, gallery.Retention(max_pictures=2, max_disk_mb=10)) == []
    assert sorted(p.name for p in folder.iterdir()) == [
        "2026-r2-panel.png", "2026-r2.png", "2026-r3-panel.png", "2026-r3.png", "2026-r99.png"]


def test_retention_makes_the_deletions_durable(tmp_path, store, monkeypatch):
    from tests.fsyncspy import record_fsyncs

    folder, _ = _gallery_of(tmp_path, store, 3)
    synced = record_fsyncs(monkeypatch)
    gallery.apply_retention(store, tmp_path, gallery.Retention(max_pictures=2, max_disk_mb=10))
    assert synced == [str(folder)]


def test_a_new_gallery_folder_is_made_durable(tmp_path, store, monkeypatch):
    from tests.fsyncspy import record_fsyncs

    image, panel = _outputs(tmp_path)
    synced = record_fsyncs(monkeypatch)
    gallery.publish(store, tmp_path, 4, image, panel, _meta(prompt="fox", seed=3))
    assert synced[0] == str(tmp_path)  # the state folder, after mkdir gallery/
