"""Every command from Home Assistant, on a real broker, round-trips to the store through the owner
actions, with the answers (and refusals) the JSON API gives."""

from __future__ import annotations

import time

from frame.daemon.wishes import Wishes
from tests.daemon.conftest import add_picture


def _until(predicate, timeout: float = 10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")


def _connected(daemon, ha):
    ha.wait_for(lambda: ha.retained.get("frame/availability") == b"online", what="the frame online")
    _until(daemon.mqtt.link.connected.is_set)


def test_paint_now_starts_one_render_and_refuses_a_second_while_it_runs(daemon, ha):
    _connected(daemon, ha)
    daemon._render_lock.acquire()  # a render is running
    try:
        answer = ha.command("paint", "PRESS")
    finally:
        daemon._render_lock.release()
    assert answer == {"command": "paint", "ok": False, "message": "a render is already running; only one at a time"}
    answer = ha.command("paint", "PRESS")
    assert answer["ok"] and answer["message"].startswith("render ")
    _until(lambda: daemon.store.count_pictures() == 1)
    assert [row.kind for row in daemon.store.renders()] == ["now"]
    assert ha.command("paint", "press me")["message"] == "send PRESS to press this button"


def test_next_and_favourite_show_pictures_through_the_daemon(daemon, ha):
    _connected(daemon, ha)
    assert ha.command("next", "PRESS") == {"command": "next", "ok": False,
                                            "message": "the gallery is empty: there is no picture to show"}
    first, second, third = (add_picture(daemon.store, prompt=f"p{i}") for i in range(3))
    daemon.store.rate(first, "stars", 5)
    daemon.store.rate(third, "thumb", 1)
    assert ha.command("next", "PRESS")["ok"]
    _until(lambda: daemon.store.last_shown() and daemon.store.last_shown().picture_id == first)
    assert ha.command("next", "PRESS")["message"] == f"picture {second} shown"
    _until(lambda: daemon.store.last_shown().picture_id == second)
    assert ha.command("favourite", "PRESS")["message"] == f"picture {third} shown"
    _until(lambda: daemon.store.last_shown().picture_id == third)
    assert ha.command("favourite", "PRESS")["message"] == f"picture {first} shown"  # round the favourites
    _until(lambda: daemon.store.last_shown().picture_id == first)


def test_a_prompt_is_queued_with_the_apis_checks(daemon, ha, monkeypatch):
    _connected(daemon, ha)
    answer = ha.command("prompt", "a <b>red</b> fox in the snow")
    assert answer["ok"], answer
    (queued,) = daemon.store.queued_prompts()
    assert queued.prompt == "a red fox in the snow"
    assert answer["message"] == f"queued prompt {queued.id}: {queued.prompt}"
    assert ha.command("prompt", "   ") == {"command": "prompt", "ok": False, "message": "prompt must not be empty"}
    blocked = daemon.config.__class__(**{**daemon.config.__dict__, "feeds": daemon.config.feeds.__class__(
        blocklist=("wolf",))})
    monkeypatch.setattr(daemon, "config", blocked)
    assert ha.command("prompt", "a grey wolf")["message"] == "prompt contains a blocklisted word"
    assert len(daemon.store.queued_prompts()) == 1
    _until(lambda: ha.state().get("queued") == 1)


def test_tonights_theme_is_painted_once_then_the_taste_model_chooses_again(daemon, ha):
    _connected(daemon, ha)
    themes = daemon.config.taste.themes
    answer = ha.command("theme", "a koi pond in autum")
    assert not answer["ok"] and answer["message"] == (
        "'a koi pond in autum' is not one of taste.themes; did you mean 'a koi pond in autumn'? (or 'auto')")
    assert ha.command("theme", themes[3])["ok"]
    assert Wishes(daemon.state_dir).theme() == themes[3]  # stored, so a restart keeps it
    _until(lambda: ha.state().get("theme") == themes[3])
    assert ha.command("paint", "PRESS")["ok"]
    _until(lambda: daemon.store.count_pictures() == 1)
    assert daemon.store.pictures(limit=1)[0].prompt.startswith(themes[3] + ", ")
    assert Wishes(daemon.state_dir).theme() is None
    _until(lambda: ha.state().get("theme") == "auto")
    assert ha.command("theme", themes[0])["ok"] and ha.command("theme", "auto")["ok"]
    assert daemon.wishes.theme() is None


def test_rating_the_picture_on_the_panel(daemon, ha):
    _connected(daemon, ha)
    assert ha.command("rate", "like")["message"] == "no picture has been shown yet, nothing to rate"
    picture_id = add_picture(daemon.store)
    daemon.store.record_shown(picture_id, "test")
    assert ha.command("rate", "4 stars")["ok"]
    stored = daemon.store.picture(picture_id)
    assert (stored.rating_kind, stored.rating_value) == ("stars", 4)
    _until(lambda: ha.state().get("rate") == "4 stars")
    assert ha.command("rate", "dislike")["ok"]
    stored = daemon.store.picture(picture_id)
    assert (stored.rating_kind, stored.rating_value) == ("thumb", -1)
    assert ha.command("rate", "11 stars")["message"].startswith("send one of: like, dislike, 1 star")


def test_the_quiet_hold_defers_pictures_until_lifted(daemon, ha):
    _connected(daemon, ha)
    picture_id = add_picture(daemon.store)
    assert ha.command("quiet", "ON")["ok"]
    assert Wishes(daemon.state_dir).quiet_hold() and daemon.shows.quiet()
    assert ha.command("next", "PRESS")["message"] == f"picture {picture_id} waits for the end of quiet hours"
    time.sleep(0.3)
    assert daemon.store.last_shown() is None
    _until(lambda: ha.state().get("quiet_hold") == "ON")
    assert ha.command("quiet", "OFF")["ok"]
    daemon._flush_pending_show()  # the main loop's tick
    _until(lambda: daemon.store.last_shown() and daemon.store.last_shown().picture_id == picture_id)
    assert ha.command("quiet", "on")["message"] == "send ON or OFF"


def test_bad_payloads_are_answered_and_never_stop_the_daemon(daemon, ha):
    _connected(daemon, ha)
    assert ha.command("prompt", b"\xff\xfe")["message"] == "the payload is not UTF-8 text"
    assert ha.command("prompt", b"x" * 5000)["message"] == "the payload is 5000 bytes; at most 2048 are read"
    before = len(ha.answers())
    ha.send("frame/cmd/rm", "PRESS")  # no such command: ignored, no answer
    # a retained command is carried out when it is sent (the broker delivers it live, retain unset) but
    # never again from the broker's store: each reconnect subscribes again and gets it marked retained
    ha.send("frame/cmd/paint", "PRESS", retain=True)
    ha.wait_for(lambda: [a for a in ha.answers()[before:] if a["command"] == "paint"], what="the paint")
    _until(lambda: daemon.store.count_pictures() == 1)
    before = len(ha.answers())
    daemon.mqtt.link.client.subscribe("frame/cmd/+", qos=1)  # what a reconnect does
    again = ha.wait_for(lambda: [a for a in ha.answers()[before:] if a["command"] == "paint"], what="an answer")
    assert again == [{"command": "paint", "ok": False,
                      "message": "a retained command is ignored: publish it without retain"}]
    assert len(daemon.store.renders()) == 1 and not any(a["command"] == "rm" for a in ha.answers())
    ha.send("frame/cmd/paint", "", retain=True)  # clear it from the broker
    _until(lambda: daemon.store.last_shown() is not None)
    assert ha.command("rate", "like")["ok"] and daemon.mqtt.link.connected.is_set()  # still answering
