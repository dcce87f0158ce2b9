import logging

from frame.daemon.store.database import Store
from frame.daemon.store.recovery import backup_path
from tests.daemon.conftest import add_picture


def _corrupt(path):
    data = bytearray(path.read_bytes())
    data[0:16] = b"this is not sql\0"
    path.write_bytes(bytes(data))


def test_corrupt_database_is_restored_from_backup(tmp_path, caplog):
    store = Store.open(tmp_path)
    pid = add_picture(store, prompt="kept in backup")
    store.backup(backup_path(store.path))
    add_picture(store, prompt="after backup")
    store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    _corrupt(tmp_path / "frame.db")
    with caplog.at_level(logging.WARNING):
        reopened = Store.open(tmp_path)
    assert reopened.picture(pid).prompt == "kept in backup"
    assert "damaged" in caplog.text and "restored" in caplog.text
    assert list(tmp_path.glob("frame.db.corrupt-*"))
    reopened.close()


def test_truncated_database_without_backup_starts_empty_and_keeps_the_damaged_file(tmp_path):
    store = Store.open(tmp_path)
    add_picture(store)
    store.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    db = tmp_path / "frame.db"
    db.write_bytes(db.read_bytes()[:1000])
    reopened = Store.open(tmp_path)
    assert reopened.count_pictures() == 0
    aside = list(tmp_path.glob("frame.db.corrupt-*"))
    assert aside and aside[0].stat().st_size == 1000
    reopened.close()


def _store_with_backup(tmp_path, prompt="kept in backup"):
    store = Store.open(tmp_path)
    pid = add_picture(store, prompt=prompt)
    store.rate(pid, "stars", 5)
    store.backup(backup_path(store.path))
    store.close()
    return pid


def test_missing_store_with_a_backup_is_restored_not_started_empty(tmp_path, caplog):
    """A cut between setting the damaged store aside and writing the copy left no frame.db at all."""
    pid = _store_with_backup(tmp_path)
    (tmp_path / "frame.db").unlink()
    with caplog.at_level(logging.WARNING):
        reopened = Store.open(tmp_path)
    assert reopened.picture(pid).prompt == "kept in backup"
    assert "missing" in caplog.text and "restored the store from its backup" in caplog.text
    reopened.close()


def test_zero_byte_store_is_damaged_and_restored_from_backup(tmp_path, caplog):
    """SQLite opens a 0-byte file as a new empty database: after a power cut that is a lost store."""
    pid = _store_with_backup(tmp_path)
    (tmp_path / "frame.db").write_bytes(b"")
    with caplog.at_level(logging.WARNING):
        reopened = Store.open(tmp_path)
    assert reopened.picture(pid).prompt == "kept in backup"
    assert "0 bytes" in caplog.text and "restored the store from its backup" in caplog.text
    aside = list(tmp_path.glob("frame.db.corrupt-*"))
    assert aside and aside[0].stat().st_size == 0
    reopened.close()


def test_zeroed_header_is_damaged_and_restored(tmp_path, caplog):
    pid = _store_with_backup(tmp_path)
    db = tmp_path / "frame.db"
    db.write_bytes(bytes(512) + db.read_bytes()[512:])  # a torn first sector
    with caplog.at_level(logging.WARNING):
        reopened = Store.open(tmp_path)
    assert reopened.picture(pid) is not None and "no SQLite header" in caplog.text
    reopened.close()


def test_restore_reaches_the_card_through_a_temp_file_and_a_folder_fsync(tmp_path, monkeypatch):
    from tests.fsyncspy import record_fsyncs

    _store_with_backup(tmp_path)
    _corrupt(tmp_path / "frame.db")
    synced = record_fsyncs(monkeypatch)
    Store.open(tmp_path).close()
    temp = [i for i, p in enumerate(synced) if "/.frame.db.tmp-" in p]
    assert temp, synced  # the restored copy was fsynced under its temporary name ...
    assert str(tmp_path) in synced[temp[0] + 1:]  # ... and the folder after the rename


def test_restore_never_replays_the_damaged_stores_wal(tmp_path):
    pid = _store_with_backup(tmp_path)
    store = Store.open(tmp_path)
    add_picture(store, prompt="only in the damaged store's WAL")
    wal = (tmp_path / "frame.db-wal").read_bytes()
    store.close()
    _corrupt(tmp_path / "frame.db")
    (tmp_path / "frame.db-wal").write_bytes(wal)
    reopened = Store.open(tmp_path)
    assert [p.id for p in reopened.pictures()] == [pid]
    assert list(tmp_path.glob("frame.db.corrupt-*-wal"))
    reopened.close()


def test_damaged_backup_is_set_aside_and_an_empty_store_started(tmp_path, caplog):
    _store_with_backup(tmp_path)
    _corrupt(tmp_path / "frame.db")
    backup_path(tmp_path / "frame.db").write_bytes(b"garbage" * 100)
    with caplog.at_level(logging.WARNING):
        reopened = Store.open(tmp_path)
    assert reopened.count_pictures() == 0 and "the backup" in caplog.text and "damaged too" in caplog.text
    assert list(tmp_path.glob("frame.db.bak.corrupt-*")) and not backup_path(tmp_path / "frame.db").exists()
    reopened.close()


def test_an_empty_store_never_replaces_a_backup_that_holds_a_history(tmp_path, caplog):
    _store_with_backup(tmp_path)
    backup = backup_path(tmp_path / "frame.db")
    before = backup.read_bytes()
    (tmp_path / "frame.db").unlink()
    (tmp_path / "frame.db.bak").rename(tmp_path / "held")
    empty = Store.open(tmp_path)  # a new store: nothing to restore from
    (tmp_path / "held").rename(backup)
    with caplog.at_level(logging.ERROR):
        assert empty.backup(backup) is False
    assert backup.read_bytes() == before and "not replacing the backup" in caplog.text
    add_picture(empty)
    assert empty.backup(backup) is True  # a store with a history of its own is backed up as usual
    empty.close()


def test_backup_removes_a_garbage_temp_file_left_by_a_cut(tmp_path):
    store = Store.open(tmp_path)
    pid = add_picture(store)
    target = backup_path(store.path)
    (tmp_path / "frame.db.bak.tmp").write_bytes(b"\x00garbage from a cut mid-backup" * 50)
    (tmp_path / "frame.db.bak.tmp-journal").write_bytes(b"\xffjournal" * 30)
    assert store.backup(target) is True
    store.close()
    assert not (tmp_path / "frame.db.bak.tmp").exists() and not (tmp_path / "frame.db.bak.tmp-journal").exists()
    (tmp_path / "frame.db").unlink()
    assert Store.open(tmp_path).picture(pid) is not None


def test_backup_rename_is_followed_by_a_folder_fsync(tmp_path, monkeypatch):
    from tests.fsyncspy import record_fsyncs

    store = Store.open(tmp_path)
    add_picture(store)
    synced = record_fsyncs(monkeypatch)
    store.backup(backup_path(store.path))
    store.close()
    assert synced == [str(tmp_path)]  # the data itself is fdatasynced by SQLite (synchronous = FULL)
