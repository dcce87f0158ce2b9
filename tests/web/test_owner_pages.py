"""What the owner met on the pages (issue 29 item 18): a 404 that offered "Back to the picture" for a
deleted picture, "No explanation was stored" on an uploaded photo, "No feed has been fetched yet" with
no feed set up, and /favicon.ico a 404 on every page view."""

from __future__ import annotations

import dataclasses

from tests.web.conftest import logged_in, make_app


def test_the_404_of_a_deleted_picture_does_not_offer_to_go_back_to_it(owner):
    page = owner.get("/pictures/999").get_data(as_text=True)
    assert "Back to the picture" not in page and "Back to the frame&#39;s page" in page


def test_an_uploaded_photo_is_not_missing_an_explanation(owner, store):
    photo = store.add_picture(file="p.jpg", prompt="The garden in May", origin="upload", width=800, height=600)
    page = owner.get(f"/pictures/{photo}").get_data(as_text=True)
    assert "No explanation was stored" not in page and "You added this photo yourself" in page


def test_status_says_when_no_feed_is_set_up(store, state_dir, pictures, controller):
    app = make_app(store, state_dir, controller)
    page = logged_in(app).get("/status").get_data(as_text=True)
    assert "No prompt feeds are set up" in page and "No feed has been fetched yet" not in page
    from frame.config import Config, FeedsConfig, WebConfig
    from tests.web.conftest import TOKEN

    with_feed = Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN),
                       feeds=dataclasses.replace(FeedsConfig(), sources=[{"url": "https://example.org/rss"}]))
    page = logged_in(make_app(store, state_dir, controller, config=with_feed)).get("/status").get_data(as_text=True)
    assert "No feed has been fetched yet" in page


def test_the_favicon_is_served(client):
    answer = client.get("/favicon.ico")
    assert answer.status_code == 200 and answer.data[:4] == b"\0\0\1\0"  # an ICO file


def test_the_strength_slider_shows_its_value(owner, pictures):
    page = owner.get(f"/pictures/{pictures['new']}").get_data(as_text=True)
    assert '<span id="strength-value" class="value" aria-live="polite">0.6</span>' in page


def test_the_login_page_says_where_the_token_is_without_a_shell(client):
    """Issue 29 item 19: the login page only pointed to `frame token`, which needs a shell on the frame."""
    page = client.get("/login").get_data(as_text=True)
    assert "<code>web.token</code> in the frame's configuration file" in page
    assert "<code>/var/lib/frame/token</code>" in page and "journalctl -u frame" in page


def test_settings_yaml_names_the_configuration_file_it_sits_on(tmp_path):
    """Issue 29 item 19: its header named /etc/frame/config.yaml even when --config named another file."""
    from frame.daemon.settings import SettingsEditor

    config = tmp_path / "my-frame.yaml"
    config.write_text(f"state_dir: {tmp_path / 'state'}\n")
    (tmp_path / "state").mkdir()
    (tmp_path / "bare").mkdir()
    editor = SettingsEditor(config, {}, state_dir=tmp_path / "state")
    proposal = editor.propose({"model.steps": 4})
    assert proposal.ok, proposal.problems
    editor.save(proposal)
    text = (tmp_path / "state" / "settings.yaml").read_text()
    assert f"differ from {config} (or the built-in defaults)" in text and "/etc/frame" not in text
    defaults = SettingsEditor(None, {}, state_dir=tmp_path / "bare")
    defaults.save(defaults.propose({"model.steps": 5}))
    assert "differ from the built-in defaults are kept" in (tmp_path / "bare" / "settings.yaml").read_text()
