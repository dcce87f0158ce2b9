"""The pages render what the store and the daemon's live status hold, and the POST forms change it."""

from __future__ import annotations

import io

from PIL import Image

from frame.config import Config, FeedsConfig, WebConfig
from tests.web.conftest import TOKEN, csrf_from, logged_in, make_app


def text(response) -> str:
    return response.get_data(as_text=True)


def test_now_showing_has_picture_prompt_theme_and_why(owner, pictures):
    html = text(owner.get("/"))
    assert f'data-picture-id="{pictures["new"]}"' in html
    assert "a quiet harbour at dawn, watercolor painting" in html
    assert "theme: a quiet harbour at dawn" in html
    assert "Chosen because you liked 3 of the 4 most similar pictures" in html
    assert f'/pictures/{pictures["new"]}/why.png' in html
    assert html.count('name="rating"') == 7  # like, dislike, 5 stars
    assert 'id="progress"' in html and "hidden" in html.split('id="progress"')[1].split(">")[0]


def test_a_picture_never_shown_is_not_called_now_showing(store, state_dir):
    """After the first render, before its show time, the panel shows nothing: the page says so and
    offers the newest picture as waiting (it once said "Now showing" while frame status said nothing)."""
    from tests.web.conftest import write_png

    write_png(state_dir / "gallery" / "a.png", (1, 2, 3))
    picture_id = store.add_picture(file="a.png", prompt="only picture")
    html = text(logged_in(make_app(store, state_dir)).get("/"))
    assert f'data-picture-id="{picture_id}"' in html and "No explanation was stored" in html
    assert "Nothing on the frame yet" in html and "Newest picture, not on the frame yet" in html
    assert "Now showing" not in html


def test_now_showing_is_the_panel_picture_not_the_newest(store, state_dir, pictures, controller):
    newer = store.add_picture(file="new.png", prompt="painted tonight, shown at 07:00")
    html = text(logged_in(make_app(store, state_dir, controller)).get("/"))
    assert f'data-picture-id="{pictures["new"]}"' in html and f'data-picture-id="{newer}"' not in html
    assert "Now showing" in html
    store.record_shown(pictures["new"], "info screen")
    html = text(logged_in(make_app(store, state_dir, controller)).get("/"))
    assert "info screen is on the panel" in html and "Under the info screen" in html


def test_empty_store_says_nothing_painted(store, state_dir):
    html = text(logged_in(make_app(store, state_dir)).get("/"))
    assert "Nothing painted yet" in html


def test_owner_sees_rating_buttons_with_current_rating(owner, pictures):
    html = text(owner.get(f"/pictures/{pictures['old']}"))
    assert html.count('name="rating"') == 7  # like, dislike, 5 stars
    assert 'value="like" class="thumb like"\n              aria-pressed="true"' in html
    assert "(liked)" in html


def test_rate_like_and_stars(owner, store, pictures):
    page = text(owner.get("/"))
    response = owner.post(f"/pictures/{pictures['new']}/rate",
                          data={"rating": "4", "csrf_token": csrf_from(page), "next": "/"})
    assert response.status_code == 303 and response.headers["Location"] == "/"
    picture = store.picture(pictures["new"])
    assert (picture.rating_kind, picture.rating_value, picture.favourite) == ("stars", 4, True)
    owner.post(f"/pictures/{pictures['new']}/rate", data={"rating": "dislike", "csrf_token": csrf_from(page)})
    picture = store.picture(pictures["new"])
    assert (picture.rating_kind, picture.rating_value, picture.favourite) == ("thumb", -1, False)
    assert "Rating saved" in text(owner.get("/"))  # flash message after redirect


def test_queue_prompt_form(owner, store):
    page = text(owner.get("/queue"))
    response = owner.post("/queue", data={"prompt": "  a red  kite over dunes ", "negative_prompt": "text",
                                          "theme": "kites", "csrf_token": csrf_from(page)})
    assert response.status_code == 303
    queued = store.queued_prompts()
    assert [(q.prompt, q.negative_prompt, q.theme) for q in queued] == [
        ("a red kite over dunes", "text", "kites")]
    html = text(owner.get("/queue"))
    assert "Queued for the next night." in html and "<q>a red kite over dunes</q>" in html


def test_gallery_lists_ratings_favourites_and_pages(owner, store, pictures, state_dir):
    html = text(owner.get("/gallery"))
    assert f'/pictures/{pictures["old"]}/thumb' in html and f'/pictures/{pictures["new"]}/thumb' in html
    assert "liked" in html and "not rated" in html and "(2)" in html
    favourites = text(owner.get("/gallery?favourites=1"))
    assert f'/pictures/{pictures["old"]}/thumb' in favourites
    assert f'/pictures/{pictures["new"]}/thumb' not in favourites
    for n in range(30):
        store.add_picture(file="old.png", prompt=f"extra {n}")
    first, second = text(owner.get("/gallery")), text(owner.get("/gallery?page=2"))
    assert first.count('class="tile-meta"') == 24 and 'rel="next"' in first
    assert second.count('class="tile-meta"') == 8 and 'rel="prev"' in second and 'rel="next"' not in second


def test_render_progress_from_live_status(owner, controller):
    controller.render = {"id": 3, "kind": "night", "stage": "denoising", "step": 5, "steps": 20,
                         "eta_seconds": 750.0, "restarts": 1}
    html = text(owner.get("/"))
    section = html.split('id="progress"')[1].split("</section>")[0]
    assert 'data-active="yes"' in section and ">\n" in section
    assert "step 5 of 20" in section and "about 12 min left" in section and 'value="25"' in section
    status = text(owner.get("/status"))
    assert "rendering" in status and "next nightly render" in status and "2026-11-30 01:00 UTC" in status


def test_status_shows_feed_health_and_renders(owner, store, pictures):
    store.set_feed_health("news", "https://example.org/feed", ok=False, items=12, error="HTTP 500",
                          from_cache=True)
    render_id = store.start_render("night", "2026-11-29")
    store.finish_render(render_id, "done", picture_id=pictures["new"])
    html = text(owner.get("/status"))
    assert "<strong>news</strong> — 12 prompts, from cache" in html and "HTTP 500" in html
    assert f'href="/pictures/{pictures["new"]}">done</a>' in html


def test_show_and_render_now_go_to_the_controller(owner, controller, pictures):
    page = text(owner.get(f"/pictures/{pictures['old']}"))
    assert owner.post(f"/pictures/{pictures['old']}/show",
                      data={"csrf_token": csrf_from(page)}).status_code == 303
    assert owner.post("/render", data={"csrf_token": csrf_from(page)}).status_code == 303
    assert controller.shown == [pictures["old"]] and controller.renders == 1


def test_images_thumbnail_panel_and_plot(owner, pictures):
    full = owner.get(f"/pictures/{pictures['new']}/image")
    assert full.status_code == 200 and full.mimetype == "image/png"
    thumb = owner.get(f"/pictures/{pictures['new']}/thumb")
    assert thumb.mimetype == "image/jpeg" and len(thumb.data) < len(full.data)
    assert Image.open(io.BytesIO(thumb.data)).size == (360, 216)
    assert owner.get(f"/pictures/{pictures['new']}/panel").status_code == 200
    assert owner.get(f"/pictures/{pictures['new']}/why.png").mimetype == "image/png"
    assert owner.get(f"/pictures/{pictures['old']}/panel").status_code == 404  # none stored
    assert owner.get(f"/pictures/{pictures['old']}/why.png").status_code == 404
    assert owner.get("/render/preview").status_code == 404  # no render running


def test_config_page_hides_secrets_and_lists_file_problems(store, state_dir, tmp_path):
    bad = tmp_path / "config.yaml"
    bad.write_text("web:\n  listen: nowhere\nschedule:\n  render_at: '25:00'\n", encoding="utf-8")
    config = Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN), feeds=FeedsConfig())
    from frame.daemon.http.app import create_app

    app = create_app(config, store, token=TOKEN, state_dir=state_dir)
    from frame.web import create_blueprint

    app.register_blueprint(create_blueprint(config, store, config_path=bad))
    html = text(logged_in(app).get("/config"))
    web_section = html.split('id="section-web"')[1].split("</section>")[0]
    assert TOKEN not in html and "<dt><code>token</code></dt><dd>***</dd>" in web_section
    assert "2 problems" in html and "web.listen: must be HOST:PORT" in html and "(line 2)" in html
    assert "<dt><code>render_at</code></dt><dd>01:00</dd>" in html
    bad.write_text("web:\n  listen: 127.0.0.1:9000\n", encoding="utf-8")
    assert "The file is valid." in text(logged_in(app).get("/config"))


def test_deleted_shown_picture_falls_back_to_newest(owner, store, pictures):
    store.record_shown(pictures["old"], "owner")
    store.delete_picture(pictures["old"], remember_rating=False)
    html = text(owner.get("/"))
    assert f'data-picture-id="{pictures["new"]}"' in html


def test_without_matplotlib_the_page_explains_in_words_and_says_where_the_plot_went(owner, store):
    """A model's choice made where matplotlib is not installed (frame[plots] left out)."""
    note = "The plot of your nearest rated pictures needs matplotlib, which is not installed"
    picture = store.add_picture(file="old.png", prompt="a koi pond in autumn", theme="a koi pond in autumn",
                                why={"sentence": "expected liking 0.80: on warmth × drama, 3 of 4 were liked",
                                     "mode": "model", "plot": None, "plot_note": note + " (pip install ...)."})
    html = text(owner.get(f"/pictures/{picture}"))
    assert "Chosen for your taste: on warmth × drama, 3 of 4 were liked." in html  # in plain words (issue 29)
    assert note in html and f"/pictures/{picture}/why.png" not in html
    assert "plot note" not in html  # the note is not repeated among the details
