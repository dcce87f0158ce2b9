"""Credentials inside configured URLs never reach the pages or the picture API, not even the owner's."""

from __future__ import annotations

import dataclasses

from frame.config import Config, FeedSource, ModelConfig, WebConfig
from tests.web.conftest import TOKEN, logged_in, make_app

MODEL_URL = "https://alice:pa55word@models.lan/sd15/?sig=S1GNATURE"
FEED_URL = "https://bob:hunter2@nas.local/prompts.json?key=K3Y-VALUE"


def test_settings_page_and_picture_model_hide_url_credentials(store, state_dir, pictures, controller):
    config = Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN), model=ModelConfig(source=MODEL_URL))
    config = dataclasses.replace(config, feeds=dataclasses.replace(config.feeds, sources=(FeedSource(url=FEED_URL),)))
    picture = store.add_picture(file="new.png", prompt="a heron", model=MODEL_URL)  # as stored before the fix
    client = logged_in(make_app(store, state_dir, controller, config))
    for page in ("/config", f"/pictures/{picture}", f"/api/pictures/{picture}", "/api/pictures"):
        text = client.get(page).get_data(as_text=True)
        assert "models.lan" in text or "nas.local" in text, page
        assert not [s for s in ("pa55word", "S1GNATURE", "hunter2", "K3Y-VALUE", "alice", "bob") if s in text], page
