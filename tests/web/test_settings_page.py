"""The settings page and /api/settings: a real form whose problems sit next to their fields, saves
that reach settings.yaml, restore, and the same owner checks as every other change."""

from __future__ import annotations

import re

import yaml

from tests.web.conftest import TOKEN, csrf_from


def _form(owner) -> tuple[str, str]:
    html = owner.get("/config").get_data(as_text=True)
    return html, csrf_from(html)


def test_the_form_offers_the_schemas_names_as_select_lists(owner):
    html, _ = _form(owner)
    sampler = re.search(r'<select id="f-model-sampler".*?</select>', html, re.S).group(0)
    assert all(f'value="{name}"' in sampler for name in ("euler_a", "ddim", "dpm++2m_karras", "lcm"))
    render_at = re.search(r'<input id="f-schedule-render_at"[^>]*>', html, re.S).group(0)
    assert 'type="time"' in render_at and 'value="01:00"' in render_at
    assert 'type="password"' in html and TOKEN not in html


def test_a_bad_value_is_refused_next_to_its_field(owner, state_dir):
    _, token = _form(owner)
    response = owner.post("/config", data={"csrf_token": token, "display.saturation": "1.5",
                                           "schedule.quiet_hours": "22:00-07:00", "feeds.sources-0-url": ""})
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    assert re.search(r'id="f-display-saturation-problem">must be between 0 and 1, got 1.5', html)
    assert 'aria-invalid="true"' in html
    assert 'value="22:00-07:00"' in html  # what the owner typed stays in the form
    assert not (state_dir / "settings.yaml").exists()


def test_a_good_save_writes_only_the_change_and_restore_brings_the_old_back(owner, state_dir):
    _, token = _form(owner)
    response = owner.post("/config", data={"csrf_token": token, "schedule.render_at": "02:30",
                                           "feeds.sources-0-url": ""})
    assert response.status_code == 303
    assert yaml.safe_load((state_dir / "settings.yaml").read_text()) == {"schedule": {"render_at": "02:30"}}
    html, token = _form(owner)
    assert "Saved. Applies at once: Start painting at." in html
    assert 'value="02:30"' in html and "Changed here." in html
    owner.post("/config", data={"csrf_token": token, "schedule.render_at": "04:00", "feeds.sources-0-url": ""})
    asked = owner.post("/config/restore", data={"csrf_token": token})  # issue 40: asks first, says what
    page = " ".join(asked.get_data(as_text=True).split())
    assert asked.status_code == 200 and "This undoes your last save on the settings page" in page
    assert "<td>Start painting at</td><td>04:00</td><td>02:30</td>" in page
    assert yaml.safe_load((state_dir / "settings.yaml").read_text()) == {"schedule": {"render_at": "04:00"}}
    owner.post("/config/restore", data={"csrf_token": token, "confirm": "yes"})
    assert yaml.safe_load((state_dir / "settings.yaml").read_text()) == {"schedule": {"render_at": "02:30"}}


def test_the_api_needs_the_owner_and_answers_per_field(client, owner, state_dir):
    anonymous = client.application.test_client()
    assert anonymous.put("/api/settings", json={"model.steps": 4}).status_code == 401
    assert anonymous.get("/api/settings").status_code == 401  # reading them needs the owner too (issue 40)
    assert owner.get("/api/settings").json["settings"]["model.steps"]["origin"] == "built-in default"
    _, token = _form(owner)
    assert owner.put("/api/settings", json={"model.steps": 4}).status_code == 400  # no CSRF header
    bad = owner.put("/api/settings", json={"model.steps": 0, "model.size": "513x320"}, headers={"X-CSRF-Token": token})
    assert bad.status_code == 422
    assert set(bad.json["problems"]) == {"model.steps", "model.size"}
    good = anonymous.put("/api/settings", json={"model.steps": 4}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert good.status_code == 200 and good.json["applies"] == {"model.steps": "next render"}
    assert yaml.safe_load((state_dir / "settings.yaml").read_text()) == {"model": {"steps": 4}}
    wrong = anonymous.put("/api/settings", json={"model.steps": 5}, headers={"Authorization": "Bearer wrong-token-1"})
    assert wrong.status_code == 401


def test_the_models_size_rule_is_named_together_with_other_problems(owner):
    """Issue 29 item 17: 504x296 passed the settings' own "multiples of 8" and the model's "multiples of
    16" showed only once the other problems were fixed; 500x496 got the settings' rule, not the model's."""
    _, token = _form(owner)
    for size in ("504x296", "500x496"):
        bad = owner.put("/api/settings", json={"model.steps": 0, "model.size": size}, headers={"X-CSRF-Token": token})
        assert bad.status_code == 422 and set(bad.json["problems"]) == {"model.steps", "model.size"}, bad.json
        assert "multiples of 16 pixels for this SD 1.5 model" in bad.json["problems"]["model.size"][0]


def test_hostile_settings_puts_are_refused_and_nothing_is_written(client, state_dir):
    """Each case is refused with a reason and settings.yaml stays absent. JSON's Infinity and NaN once
    passed the minimum check (``model.guidance: .inf`` was saved and reached the render)."""
    bearer = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    for body, status, key in [
        ('{"model.guidance": Infinity}', 422, "model.guidance"),
        ('{"taste.explore_rate": NaN}', 422, "taste.explore_rate"),
        ('{"feeds.sources": [{"url": "https://example.org/f", "weight": Infinity}]}', 422, "feeds.sources"),
        ('{"web.token": "chosen-by-the-attacker"}', 422, ""),  # not on the page: no key the page does not own
        ('{"state_dir": "/tmp"}', 422, ""),
        ('{"model.steps": true}', 422, "model.steps"),
        ('{"schedule.render_at": ["02:00"]}', 422, "schedule.render_at"),
        ('{"feeds.sources": [{"url": "https://example.org/f", "extra": 1}]}', 422, "feeds.sources"),
        ('[["model.steps", 4]]', 400, None), ('{"model.steps": 4', 400, None), ("[" * 100_000, 413, None),
    ]:
        response = client.put("/api/settings", data=body, headers=bearer)
        assert response.status_code == status, (body[:60], response.get_data(as_text=True)[:300])
        if key is not None:
            assert response.json["problems"][key], body
        assert not (state_dir / "settings.yaml").exists(), body


def test_the_form_refuses_infinite_numbers(owner, state_dir):
    _, token = _form(owner)
    response = owner.post("/config", data={"csrf_token": token, "model.guidance": "inf", "feeds.sources-0-url": ""})
    assert response.status_code == 400
    assert re.search(r'id="f-model-guidance-problem">must be a finite number', response.get_data(as_text=True))
    assert not (state_dir / "settings.yaml").exists()


def test_a_settings_body_without_a_length_is_capped_too(client, state_dir):
    """The 16 kB cap was checked against Content-Length only: a chunked PUT of 60 kB (under the server's
    64 KiB) was read and parsed whole. Now the same cap stops the read."""
    import io

    themes = ["a quiet harbour at dawn, oil on canvas"] * 1500  # ~60 kB of JSON
    body = ('{"taste.themes": ' + __import__("json").dumps(themes) + "}").encode()
    assert 16 * 1024 < len(body) < 64 * 1024
    response = client.put("/api/settings", input_stream=io.BytesIO(body),
                          headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
                                   "Transfer-Encoding": "chunked"},
                          environ_overrides={"wsgi.input_terminated": True})  # as waitress hands it over, de-chunked
    assert response.status_code == 413, response.get_data(as_text=True)[:200]
    assert response.is_json  # the API's own answer since /api/settings moved there (the page's was HTML)
    assert not (state_dir / "settings.yaml").exists()


def test_too_many_wrong_tokens_on_the_settings_api_are_the_apis_429(client, state_dir):
    """/api/settings counts wrong tokens in the limiter the rest of the API and the login share, and
    answers as the rest of the API does: JSON with Retry-After."""
    for _ in range(10):
        assert client.put("/api/settings", json={"model.steps": 4},
                          headers={"Authorization": "Bearer wrong-token"}).status_code == 401
    refused = client.put("/api/settings", json={"model.steps": 4}, headers={"Authorization": f"Bearer {TOKEN}"})
    assert refused.status_code == 429 and refused.is_json and refused.headers["Retry-After"]
    assert "too many wrong owner tokens" in refused.json["error"]
    assert not (state_dir / "settings.yaml").exists()


def test_a_settings_form_without_a_length_is_refused_whole_never_saved_cut(owner, state_dir):
    """A chunked form skipped the 16 kB check (it looked at Content-Length only) and was read up to the
    app's cap, where werkzeug's stream ends without a word: past it the cut form would be saved, its last
    theme cut mid-word. A body without a length that reaches the cap is refused whole."""
    import io
    from urllib.parse import urlencode

    _, token = _form(owner)
    themes = "\n".join(f"theme number {i}" for i in range(1500))
    body = urlencode({"csrf_token": token, "feeds.sources-0-url": "", "taste.themes": themes}).encode()
    assert 16 * 1024 < len(body) < 64 * 1024
    response = owner.post("/config", input_stream=io.BytesIO(body),
                          headers={"Content-Type": "application/x-www-form-urlencoded", "Transfer-Encoding": "chunked"},
                          environ_overrides={"wsgi.input_terminated": True})
    assert response.status_code == 413
    assert not (state_dir / "settings.yaml").exists()
    small = urlencode({"csrf_token": token, "feeds.sources-0-url": "", "schedule.render_at": "02:30"}).encode()
    response = owner.post("/config", input_stream=io.BytesIO(small),
                          headers={"Content-Type": "application/x-www-form-urlencoded", "Transfer-Encoding": "chunked"},
                          environ_overrides={"wsgi.input_terminated": True})
    assert response.status_code == 303  # a small chunked form is still read whole and saved
    assert yaml.safe_load((state_dir / "settings.yaml").read_text()) == {"schedule": {"render_at": "02:30"}}


def test_control_characters_are_refused_with_the_line_and_the_character(owner, client, state_dir):
    """Themes, styles, the negative prompt and feed texts took NUL and U+202E (which makes text read
    other than it is) although the queue form refuses them; the page now says which line and which one."""
    _, token = _form(owner)
    response = owner.post("/config", data={"csrf_token": token, "taste.themes": "a harbour\nthe \u202esea",
                                           "model.negative_prompt": "blurry\x00", "feeds.sources-0-url": ""})
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    assert re.search(r'id="f-taste-themes-problem">line 2: contains a control character U\+202E '
                     r'\(RIGHT-TO-LEFT OVERRIDE\)', html)
    assert re.search(r'id="f-model-negative_prompt-problem">contains a control character U\+0000', html)
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    feed = {"url": "https://example.org/f", "name": "news\u2067", "template": "{title}"}
    response = client.put("/api/settings", json={"feeds.sources": [feed]}, headers=bearer)
    assert response.status_code == 422
    assert response.json["problems"]["feeds.sources"] == [
        "feed 1, name: contains a control character U+2067 (RIGHT-TO-LEFT ISOLATE)"]
    assert not (state_dir / "settings.yaml").exists()


def test_guidance_has_an_upper_end_and_the_inputs_say_so(owner, state_dir):
    html, token = _form(owner)
    guidance = re.search(r'<input id="f-model-guidance"[^>]*>', html, re.S).group(0)
    assert 'max="30' in guidance
    queue_input = re.search(r'<input id="guidance"[^>]*>', owner.get("/queue").get_data(as_text=True)).group(0)
    assert 'max="30"' in queue_input
    response = owner.post("/config", data={"csrf_token": token, "model.guidance": "31", "feeds.sources-0-url": ""})
    assert response.status_code == 400
    assert re.search(r'id="f-model-guidance-problem">must be from 0 to 30, got 31', response.get_data(as_text=True))
    assert not (state_dir / "settings.yaml").exists()


def test_feed_weights_are_bounded(client, state_dir):
    """``weight: 1e308`` was saved; times a feed item's own weight 100 it became inf and every night
    then failed with "No new picture"."""
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for weight in (1e308, 101, 0):
        feed = {"url": "https://example.org/f", "name": "news", "template": "{title}", "weight": weight}
        response = client.put("/api/settings", json={"feeds.sources": [feed]}, headers=bearer)
        assert response.status_code == 422, weight
        assert "weight" in response.json["problems"]["feeds.sources"][0]
    assert not (state_dir / "settings.yaml").exists()
    feed["weight"] = 100
    assert client.put("/api/settings", json={"feeds.sources": [feed]}, headers=bearer).status_code == 200


def test_feed_templates_and_blocklist_are_checked_when_saved(client, state_dir):
    """Templates the feed parser refuses and an empty blocklist entry (which blocks every queued
    prompt) were saved; they are now refused with the parser's own words."""
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for template in ("{0.__class__.__mro__}", "{title:>999999999}", "{title!r}", "{title", "{body}"):
        feed = {"url": "https://example.org/f", "name": "news", "template": template}
        response = client.put("/api/settings", json={"feeds.sources": [feed]}, headers=bearer)
        assert response.status_code == 422, template
        assert "template" in response.json["problems"]["feeds.sources"][0], template
    for blocklist in ([""], ["gore", "  "]):
        response = client.put("/api/settings", json={"feeds.blocklist": blocklist}, headers=bearer)
        assert response.status_code == 422, blocklist
        assert "empty" in response.json["problems"]["feeds.blocklist"][0]
    assert not (state_dir / "settings.yaml").exists()
    ok = {"url": "https://example.org/f", "name": "news", "template": "{title}, {style} ({theme})"}
    assert client.put("/api/settings", json={"feeds.sources": [ok], "feeds.blocklist": ["gore"]},
                      headers=bearer).status_code == 200


def test_a_full_disk_answers_the_settings_api_in_json(client, state_dir, monkeypatch):
    import errno

    from frame.config import owner

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(owner, "write_private_atomic", full)
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    response = client.put("/api/settings", json={"model.steps": 4}, headers=bearer)
    assert response.status_code == 507 and response.is_json and "full" in response.json["error"]
    no_csrf = client.application.test_client()
    from tests.web.conftest import login
    login(no_csrf)
    refused = no_csrf.put("/api/settings", json={"model.steps": 4})
    assert refused.status_code == 400 and refused.is_json


def test_the_tiny_vae_is_offered_with_its_trade_off_and_saved(owner, state_dir, tmp_path):
    from frame.convert.importer.vae import import_tiny_vae
    from tests.convert.test_tiny_vae_import import _fixture_folder

    html, token = _form(owner)
    field = re.search(r'<input id="f-model-vae_decoder"[^>]*>', html, re.S).group(0)
    assert 'value=""' in field  # the full VAE stays the default
    assert "the decode is many times faster, the picture a little softer" in html
    missing = owner.post("/config", data={"csrf_token": token, "model.vae_decoder": "taesd",
                                          "feeds.sources-0-url": ""})
    assert missing.status_code == 400 and "frame model import --tiny-vae taesd" in missing.get_data(as_text=True)
    assert not (state_dir / "settings.yaml").exists()
    folder = tmp_path / "taesd-onnx"  # a folder by its path (the name taesd: <state_dir>/models/taesd)
    import_tiny_vae(str(_fixture_folder(tmp_path)[0]), folder, weights="fp32")
    _, token = _form(owner)
    response = owner.post("/config", data={"csrf_token": token, "model.vae_decoder": str(folder),
                                           "feeds.sources-0-url": ""})
    assert response.status_code == 303, re.findall(r'-problem">([^<]*)', response.get_data(as_text=True))
    assert yaml.safe_load((state_dir / "settings.yaml").read_text()) == {"model": {"vae_decoder": str(folder)}}
    _, token = _form(owner)
    bad = owner.post("/config", data={"csrf_token": token, "model.vae_decoder": "ftp://nas/taesd",
                                      "feeds.sources-0-url": ""})
    assert bad.status_code == 400 and 'id="f-model-vae_decoder-problem"' in bad.get_data(as_text=True)
