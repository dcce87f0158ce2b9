"""What the owner met on the pages (issue 29 item 18): a 404 that offered "Back to the picture" for a
deleted picture, "No explanation was stored" on an uploaded photo, "No feed has been fetched yet" with
no feed set up, and /favicon.ico a 404 on every page view."""

from __future__ import annotations

import dataclasses

from tests.web.conftest import make_app


def test_the_404_of_a_deleted_picture_does_not_offer_to_go_back_to_it(client):
    page = client.get("/pictures/999").get_data(as_text=True)
    assert "Back to the picture" not in page and "Back to the frame&#39;s page" in page


def test_an_uploaded_photo_is_not_missing_an_explanation(owner, store):
    photo = store.add_picture(file="p.jpg", prompt="The garden in May", origin="upload", width=800, height=600)
    page = owner.get(f"/pictures/{photo}").get_data(as_text=True)
    assert "No explanation was stored" not in page and "You added this photo yourself" in page


def test_status_says_when_no_feed_is_set_up(store, state_dir, pictures, controller):
    app = make_app(store, state_dir, controller)
    page = app.test_client().get("/status").get_data(as_text=True)
    assert "No prompt feeds are set up" in page and "No feed has been fetched yet" not in page
    from frame.config import Config, FeedsConfig, WebConfig
    from tests.web.conftest import TOKEN

    with_feed = Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN),
                       feeds=dataclasses.replace(FeedsConfig(), sources=[{"url": "https://example.org/rss"}]))
    page = make_app(store, state_dir, controller, config=with_feed).test_client().get("/status").get_data(as_text=True)
    assert "No feed has been fetched yet" in page


def test_the_favicon_is_served(client):
    answer = client.get("/favicon.ico")
    assert answer.status_code == 200 and answer.data[:4] == b"\0\0\1\0"  # an ICO file


def test_the_strength_slider_shows_its_value(owner, pictures):
    page = owner.get(f"/pictures/{pictures['new']}").get_data(as_text=True)
    assert '<span id="strength-value" class="value" aria-live="polite">0.6</span>' in page
