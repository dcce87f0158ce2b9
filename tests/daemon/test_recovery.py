import logging

from frame.daemon.recovery import backup_path
from frame.daemon.store import Store
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
    assert reopened.picture(pid)["prompt"] == "kept in backup"
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
