"""Wording and validation helpers, without a web server."""

from __future__ import annotations

import pytest

from frame.config import Config, WebConfig
from frame.daemon.store.records import StoredPicture
from frame.web import present
from frame.web.forms import FormError, check_blocklist, clean_text, parse_page, parse_rating, safe_next
from frame.web.settings import flatten, grouped, notes


@pytest.mark.parametrize(("kind", "value", "label"), [
    ("thumb", 1, "liked"), ("thumb", -1, "disliked"), ("stars", 3, "★★★☆☆"), ("stars", 5, "★★★★★"),
    (None, None, "not rated"),
])
def test_rating_label(kind, value, label):
    assert present.rating_label(StoredPicture.from_row({"rating_kind": kind, "rating_value": value})) == label


def test_why_in_its_shapes():
    assert present.why_sentence("because") == "because"
    assert present.why_sentence({"sentence": "because", "plot": "p.png"}) == "because"
    assert present.why_sentence({"explanation": "x"}) == "x"
    assert present.why_sentence(None) == "" and present.why_sentence(["x"]) == ""
    assert present.why_plot_name({"plot": "p.png"}) == "p.png" and present.why_plot_name("text") is None
    details = present.why_details({"sentence": "s", "confidence": 0.756, "neighbours": [1, 2], "theme": "sea"})
    assert details == [("confidence", "0.76"), ("theme", "sea")]


@pytest.mark.parametrize(("seconds", "text"), [
    (None, ""), (float("nan"), ""), (True, ""), (12.4, "12 s"), (89, "89 s"), (750, "12 min"),
    (5340, "89 min"), (7500, "2 h 05 min"), (-3, "0 s"),
])
def test_duration(seconds, text):
    assert present.duration(seconds) == text


def test_progress_view():
    assert present.progress_view({})["active"] is False
    view = present.progress_view({"render": {"stage": "decoding", "step": 20, "steps": 20, "eta_seconds": 0,
                                             "preview": "p.png"}, "notice": "showing a favourite"})
    assert (view["percent"], view["eta"], view["has_preview"], view["notice"]) == (
        100, "0 s", True, "showing a favourite")
    assert present.progress_view({"render": {"stage": "starting", "step": 0, "steps": None}})["percent"] is None


def test_progress_view_shows_bytes_per_step_and_link_rate():
    view = present.progress_view({"render": {"step": 3, "steps": 20, "bytes_per_step": 3437361936,
                                             "link_rate": 4100000}})
    assert view["fetch"] == "3.44 GB of weights per step · link 4.1 MB/s"
    assert present.progress_view({"render": {"bytes_per_step": 860000000}})["fetch"] == "860 MB of weights per step"
    assert present.progress_view({"render": {"step": 1}})["fetch"] == ""


def test_progress_line_counts_the_weight_cache():
    """With model.cache on the line said only "link 123 B/s" (the version probes): now it says how much
    of each step came from the cache."""
    view = present.progress_view({"render": {"step": 3, "steps": 20, "bytes_per_step": 3437361936,
                                             "cache_bytes_per_step": 3437361936, "link_rate": 123}})
    assert view["fetch"] == "3.44 GB of weights per step (3.44 GB from the cache) · link 123 B/s"


def test_short_time():
    assert present.short_time("2026-11-29T22:41:07+00:00") == "2026-11-29 22:41 UTC"
    assert present.short_time("2026-11-29T23:41:07+01:00") == "2026-11-29 22:41 UTC"
    assert present.short_time("yesterday") == "yesterday" and present.short_time(None) == ""


def test_clean_text():
    assert clean_text({"p": "  two\n words  "}, "p", 20) == "two words"
    assert clean_text({}, "p", 20) == ""
    with pytest.raises(FormError, match="p: must not be empty"):
        clean_text({"p": " \t"}, "p", 20, required=True)
    with pytest.raises(FormError, match="too long"):
        clean_text({"p": "x" * 21}, "p", 20)
    with pytest.raises(FormError, match=r"p: contains a control character U\+0007"):
        clean_text({"p": "bell\x07"}, "p", 20)
    with pytest.raises(FormError, match=r"contains a control character U\+200B \(ZERO WIDTH SPACE\)"):
        clean_text({"p": "zero\u200bwidth"}, "p", 20)


def test_the_queue_form_and_the_configuration_share_one_text_rule():
    """One helper (``frame.config.checks.plain_text``) for both, so a theme the settings page refuses is
    refused on the queue form with the same words, and the other way round."""
    from frame.config import checks

    for text in ("a\x00b", "a\u202eb", "a\u2066b", "a\ud800b", "a\ue000b", "a\x7fb"):
        with pytest.raises(FormError) as info:
            clean_text({"p": text}, "p", 20)
        assert info.value.message == checks.plain_text(text)
    assert clean_text({"p": "tab\tand\r\nnewline"}, "p", 40) == "tab and newline"


def test_blocklist_is_case_insensitive():
    check_blocklist({"prompt": "a calm sea"}, ("storm",))
    with pytest.raises(FormError, match="theme: contains 'storm'"):
        check_blocklist({"prompt": "sea", "theme": "STORMY"}, ("storm",))


def test_parse_rating_and_page():
    assert parse_rating("like") == ("thumb", 1) and parse_rating("5") == ("stars", 5)
    for bad in (None, "0", "6", " 3", "+1", "٣"):
        with pytest.raises(FormError):
            parse_rating(bad)
    assert parse_page(None) == 1 and parse_page("3") == 3
    for bad in ("0", "x", "10001", "²"):
        with pytest.raises(FormError):
            parse_page(bad)


@pytest.mark.parametrize(("target", "expected"), [
    ("/gallery", "/gallery"), ("/gallery?page=2", "/gallery?page=2"), ("/pictures/3", "/pictures/3"),
    ("//evil.example", "/d"), ("/\\evil.example", "/d"), ("http://evil", "/d"), ("/a/../b", "/d"),
    ("", "/d"), (None, "/d"), ("/x\r\nSet-Cookie: a=b", "/d"), ("/gallery\n", "/d"),
])
def test_safe_next(target, expected):
    assert safe_next(target, "/d") == expected


def test_settings_flatten_and_notes():
    rows = flatten({"state_dir": "/s", "feeds": {"sources": [{"url": "u", "weight": 1.0}], "blocklist": []},
                    "buttons": {"pins": {"5": "like"}, "enabled": False}, "model": {"steps": None}})
    assert rows == [("state_dir", "/s"), ("feeds.sources[0].url", "u"), ("feeds.sources[0].weight", "1.0"),
                    ("feeds.blocklist", "(none)"), ("buttons.pins.5", "like"), ("buttons.enabled", "false"),
                    ("model.steps", "(automatic)")]
    assert grouped(rows)[0] == ("general", [("state_dir", "/s")])
    assert any(n.startswith("web.token: empty") for n in notes(Config()))
    assert not any(n.startswith("web.token") for n in notes(Config(web=WebConfig(token="t" * 16))))


def test_plot_note_is_shown_instead_of_a_missing_plot():
    why = {"sentence": "s", "plot": None, "plot_note": "needs matplotlib"}
    view = present.picture_view(StoredPicture.from_row({"id": 1, "why": why}))
    assert view["has_plot"] is False and view["plot_note"] == "needs matplotlib" and view["why_details"] == []


VARIETY_WHY = {  # as the worker stores a variety pick (Why.to_json of the picker's Choice.to_dict)
    "candidate": {"text": "a harbour, watercolor", "theme": "harbours", "style": "watercolor"},
    "mode": "variety", "score": None, "explanation": {"ratings": 0},
    "reason": "no ratings yet: choosing for variety — theme 'harbours' was shown 0 times before",
    "sentence": "no ratings yet: choosing for variety — theme 'harbours' was shown 0 times before",
    "method": "taste (variety)", "ratings": 0}
MODEL_WHY = {
    "candidate": {"theme": "lakes"}, "mode": "model", "score": 0.734, "ratings": 14, "search": "joint",
    "reason": "expected liking 0.73: on colour, 3 of your 5 most similar rated pictures were liked",
    "sentence": "expected liking 0.73: on colour, 3 of your 5 most similar rated pictures were liked",
    "method": "taste (model)", "plot": "p.png"}


def test_why_this_picture_is_one_plain_sentence_with_the_details_folded(owner, store):
    """Issue 29 item 20: the sentence came again as "reason", beside "mode variety" and "method taste
    (variety)"."""
    assert present.plain_why(VARIETY_WHY) == ("Chosen for variety: the theme “harbours” had been shown least so "
                                              "far. Once you have rated more pictures, your taste decides.")
    assert present.why_details(VARIETY_WHY) == [("rated pictures it learnt from", "0")]
    assert present.plain_why(MODEL_WHY) == ("Chosen for your taste: of the 5 rated pictures most like it in its "
                                            "colour, you liked 3.")
    assert present.why_details(MODEL_WHY) == [("rated pictures it learnt from", "14")]  # issue 40: no "73 %"
    assert present.plain_why({"method": "queue", "sentence": "you queued this prompt"}) == "You queued this prompt."
    picture = store.add_picture(file="v.png", prompt="a harbour, watercolor", seed=1, why=VARIETY_WHY)
    page = owner.get(f"/pictures/{picture}").get_data(as_text=True)
    assert page.count("had been shown least so far") == 1
    for jargon in ("mode", "taste (variety)", "choosing for variety —", "<dt>reason</dt>"):
        assert jargon not in page.split("Why this picture?")[1].split("</details>\n<details")[0], jargon
    assert "<summary>More about this choice</summary>" in page


@pytest.mark.parametrize(("kind", "value"), [("thumb", 1), ("thumb", -1)] + [("stars", n) for n in range(1, 6)])
def test_verdict_is_what_the_taste_model_learns(kind, value):
    """Issue 40 item 21: 4-5 stars did not press "Like" although the taste model learns them as liked."""
    pytest.importorskip("sklearn")  # frame.taste imports it
    from frame.taste.ratings import rating_class

    picture = StoredPicture.from_row({"rating_kind": kind, "rating_value": value})
    assert present.verdict(picture) == rating_class(value == 1 if kind == "thumb" else value)


def test_an_unrated_picture_has_no_verdict():
    assert present.verdict(StoredPicture.from_row({"rating_kind": None, "rating_value": None})) == ""


@pytest.mark.parametrize(("summary", "said"), [
    ("on warmth × realism, 5 of your 8 most similar rated pictures were liked",
     "of the 8 rated pictures most like it in the warmth of its colours and how realistic it looks, you liked 5"),
    ("on drama × urban × darkness, 4 of your 6 most similar rated pictures were disliked",
     "of the 6 rated pictures most like it in how dramatic it is, city versus nature and how dark it is, "
     "you disliked 4"),
    ("on detail, 2 of your 3 most similar rated pictures were neutral",
     "of the 3 rated pictures most like it in how busy it is, you gave 3 stars to 2"),
    ("something else entirely", None),
])
def test_the_taste_sentence_in_plain_words(summary, said):
    """Issue 40 item 19: "warmth × realism" was the model's jargon."""
    assert present.similar_in_words(summary) == said


def test_the_picker_sentence_is_the_one_the_page_rewords():
    """The page's pattern follows the picker's own sentence (frame.taste.picker.SENTENCE)."""
    pytest.importorskip("sklearn")
    from frame.taste.picker import SENTENCE

    summary = SENTENCE.format(space="warmth × realism", count=5, k=8, label="liked")
    why = {"mode": "model", "score": 1.0, "sentence": f"expected liking 1.00: {summary}"}
    plain = present.plain_why(why)
    assert plain == ("Chosen for your taste: of the 8 rated pictures most like it in the warmth of its colours "
                     "and how realistic it looks, you liked 5.")
    assert "×" not in plain and "100" not in str(present.why_details(why))
