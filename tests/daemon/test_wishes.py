"""The owner's wishes file (STATE/wishes.json): kept over a restart, and read as hostile."""

from __future__ import annotations

from frame import statefile
from frame.daemon.wishes import WISHES_FILE, Wishes


def test_wishes_are_kept_and_the_theme_is_taken_once(tmp_path):
    wishes = Wishes(tmp_path)
    wishes.set_theme("a koi pond in autumn")
    wishes.set_quiet_hold(True)
    again = Wishes(tmp_path)
    assert again.theme() == "a koi pond in autumn" and again.quiet_hold()
    assert again.take_theme(("a koi pond in autumn",)) == "a koi pond in autumn"
    assert again.take_theme(("a koi pond in autumn",)) is None and Wishes(tmp_path).theme() is None
    assert Wishes(tmp_path).quiet_hold()  # the hold stays until lifted


def test_a_theme_removed_from_the_settings_is_dropped(tmp_path, caplog):
    wishes = Wishes(tmp_path)
    wishes.set_theme("a lighthouse in a storm")
    assert wishes.take_theme(("a field of sunflowers",)) is None
    assert "no longer in taste.themes" in caplog.text and Wishes(tmp_path).theme() is None


def test_a_hostile_or_damaged_file_gives_no_wishes(tmp_path):
    statefile.write_json(tmp_path / WISHES_FILE, {"theme": "x" * 100_000, "quiet_hold": "yes"})
    wishes = Wishes(tmp_path)
    assert wishes.theme() is None and not wishes.quiet_hold()
    statefile.write_json(tmp_path / WISHES_FILE, ["theme"])
    assert Wishes(tmp_path).theme() is None
    (tmp_path / WISHES_FILE).write_text('{"sha256": "0", "data": {"quiet_hold": true}}')
    assert not Wishes(tmp_path).quiet_hold()  # checksum wrong: set aside, not believed
    assert list(tmp_path.glob(f"{WISHES_FILE}.corrupt-*"))
