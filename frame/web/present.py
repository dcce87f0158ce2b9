"""Turn store rows and daemon status into what the templates show (plain dicts and strings).

Kept apart from the views so the wording ("liked", "★★★★☆", "about 12 min left") is tested without a
web server, and so templates stay free of logic beyond loops and ifs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from frame.config import embedding_names, lora_tags
from frame.daemon import notices
from frame.daemon.store.records import FeedHealth, RenderRow, StoredPicture
from frame.redact import redact_deep, redact_text, redact_url

STARS = 5


def rating_label(picture: StoredPicture) -> str:
    """The picture's latest rating in words: "liked", "disliked", "★★★☆☆" or "not rated"."""
    kind, value = picture.rating_kind, picture.rating_value
    if kind == "thumb":
        return "liked" if value == 1 else "disliked"
    if kind == "stars" and isinstance(value, int):
        return "★" * value + "☆" * (STARS - value)
    return "not rated"


def verdict(picture: StoredPicture) -> str:
    """"liked", "neutral", "disliked" or "" (not rated): what the taste model learns from the picture's
    latest rating, 4-5 stars being a like and 1-2 a dislike (``frame.taste.ratings.rating_class``, which
    the daemon may not import; ``tests/web/test_present.py`` keeps the two the same). The Like and
    Dislike buttons show it pressed, so 5 stars reads as the like it is."""
    kind, value = picture.rating_kind, picture.rating_value
    if kind == "thumb" and value in (1, -1):
        return "liked" if value == 1 else "disliked"
    if kind == "stars" and isinstance(value, int) and 1 <= value <= STARS:
        return "liked" if value >= 4 else "neutral" if value == 3 else "disliked"
    return ""


def why_sentence(why: Any) -> str:
    """The stored explanation sentence, whatever shape the daemon saved it in."""
    if isinstance(why, str):
        return why
    if isinstance(why, Mapping):
        for key in ("sentence", "text", "explanation", "summary"):
            if isinstance(why.get(key), str) and why[key]:
                return why[key]
    return ""


_LIKING = re.compile(r"^expected liking -?[0-9.]+(: )?")
# the picker's sentence (frame.taste.picker.SENTENCE): "on warmth × realism, 5 of your 8 most similar ..."
_SIMILAR = re.compile(r"^on (?P<space>.+?), (?P<count>\d+) of your (?P<k>\d+) most similar rated pictures "
                      r"were (?P<label>liked|disliked|neutral)\.?$")
# the default taste axes (frame.taste.features.DEFAULT_AXES) as an owner says them; an owner's own axis
# is "its NAME"
_AXIS_WORDS = {"warmth": "the warmth of its colours", "realism": "how realistic it looks",
               "drama": "how dramatic it is", "urban": "city versus nature", "darkness": "how dark it is",
               "detail": "how busy it is"}
_VERDICT_WORDS = {"liked": "you liked", "disliked": "you disliked", "neutral": "you gave 3 stars to"}


def _sentence_case(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:] if text else text
    return text if not text or text.endswith((".", "!", "?")) else text + "."


def plain_why(why: Any) -> str:
    """One plain sentence for "Why this picture?": the picker's own note ("no ratings yet: choosing for
    variety — theme 'sea' was shown 0 times before", "expected liking 0.73: on colour, 3 of your 5 …")
    said as an owner would say it; its numbers and terms go to the folded details."""
    sentence = why_sentence(why)
    if not isinstance(why, Mapping):
        return _sentence_case(sentence)
    candidate = why.get("candidate") if isinstance(why.get("candidate"), Mapping) else {}
    theme = candidate.get("theme") if isinstance(candidate.get("theme"), str) and candidate.get("theme") else ""
    about = f" “{theme}”" if theme else ""
    mode = why.get("mode")
    if mode == "variety":
        return (f"Chosen for variety: the theme{about} had been shown least so far. Once you have rated more "
                "pictures, your taste decides.")
    if mode == "explore":
        return f"Chosen to learn more about your taste: you had rated few pictures of the theme{about}."
    if mode == "model":
        rest = _LIKING.sub("", sentence)
        rest = similar_in_words(rest) or rest
        return _sentence_case(f"Chosen for your taste: {rest}" if rest else "Chosen for your taste")
    return _sentence_case(sentence)


def similar_in_words(summary: str) -> str | None:
    """The picker's "on warmth × realism, 5 of your 8 most similar rated pictures were liked" as an owner
    says it: "of the 8 rated pictures most like it in the warmth of its colours and how realistic it
    looks, you liked 5"; None for any other sentence. The axis names and the "×" were the model's terms."""
    found = _SIMILAR.match(summary.strip())
    if found is None:
        return None
    aspects = [_AXIS_WORDS.get(name.strip(), f"its {name.strip()}") for name in found["space"].split("×")]
    joined = aspects[0] if len(aspects) == 1 else ", ".join(aspects[:-1]) + " and " + aspects[-1]
    return (f"of the {found['k']} rated pictures most like it in {joined}, "
            f"{_VERDICT_WORDS[found['label']]} {found['count']}")


def why_plot_name(why: Any) -> str | None:
    """The gallery file name of the explanation plot (PNG), if the store has one."""
    if isinstance(why, Mapping):
        for key in ("plot", "plot_file"):
            if isinstance(why.get(key), str) and why[key]:
                return why[key]
    return None


def why_plot_note(why: Any) -> str:
    """Why a model's choice has no plot (matplotlib not installed, say), shown where the plot would be."""
    note = why.get("plot_note") if isinstance(why, Mapping) else None
    return note if isinstance(note, str) else ""


_WHY_LABELS = {"ratings": "rated pictures it learnt from", "confidence": "confidence", "theme": "theme",
               "painted": "painted", "remote_fallback": "render server"}
# said by the sentence, or the picker's internals; "score" (the model's expected liking) once read "how
# much you may like it 100 %" beside "5 of your 8 most similar were liked": the sentence's count says it
_WHY_HIDDEN = {"sentence", "text", "explanation", "summary", "plot", "plot_file", "plot_note", "reason", "mode",
               "method", "search", "score"}


def why_details(why: Any) -> list[tuple[str, str]]:
    """The facts behind the sentence for the folded "More about this choice" (scalar fields only, in
    plain words; the sentence, the picker's own note and its internal terms are not repeated)."""
    if not isinstance(why, Mapping):
        return []
    details = []
    for key, value in why.items():
        if key in _WHY_HIDDEN or isinstance(value, (Mapping, list, tuple)) or value in (None, ""):
            continue
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        details.append((_WHY_LABELS.get(key, key.replace("_", " ")), shown))
    return details


def picture_view(picture: StoredPicture, embeddings: Iterable[str] = ()) -> dict[str, Any]:
    """One gallery picture as the templates need it; ``embeddings``: the names of the embedding files
    found, for the details' "embeddings" (the picture pages pass them; the gallery needs none)."""
    why = picture.why
    return {
        "id": picture.id,
        "prompt": picture.prompt or "",
        "negative_prompt": picture.negative_prompt or "",
        "theme": picture.theme or "",
        "style": picture.style or "",
        "origin": picture.origin or "",
        "created": short_time(picture.created_at),
        "rating": rating_label(picture),
        "rating_kind": picture.rating_kind,
        "rating_value": picture.rating_value,
        "verdict": verdict(picture),
        "favourite": picture.favourite,
        "why": plain_why(why),
        "why_details": why_details(why),
        "has_plot": why_plot_name(why) is not None,
        "plot_note": why_plot_note(why),
        "has_panel": bool(picture.panel_file),
        "seed": picture.seed,
        "uploaded": picture.origin == "upload",
        "facts": _facts(picture) + used_extras(picture, embeddings),
    }


def _facts(picture: StoredPicture) -> list[tuple[str, str]]:
    facts = []
    for label, value in (("seed", picture.seed), ("sampler", picture.sampler), ("steps", picture.steps),
                         ("model", picture.model)):
        if value not in (None, ""):
            facts.append((label, redact_url(str(value))))  # a model URL may carry credentials
    if picture.width and picture.height:
        facts.append(("size", f"{picture.width}×{picture.height}"))
    return facts


def used_extras(picture: StoredPicture, embeddings: Iterable[str] = ()) -> list[tuple[str, str]]:
    """The LoRAs (the stored prompts' ``<lora:…>`` tags, in A1111's form as written, which paste back
    into A1111 or ComfyUI) and the embeddings (words of the prompts naming one of ``embeddings``) a
    picture asked for. Each tag carries what the night made of it (the worker's ``loras`` note in the
    picture's why: "matched 3 layers", "matched 0 layers", "not applied: …"), so a LoRA that changed
    nothing or was left out is not shown as applied."""
    facts = []
    prompt, negative = picture.prompt or "", picture.negative_prompt or ""
    why = picture.why if isinstance(picture.why, Mapping) else {}
    notes = why.get("loras") if isinstance(why.get("loras"), Mapping) else {}
    shown = []
    for text in (prompt, negative):
        for match in lora_tags.TAG.finditer(text):
            note = notes.get(match.group(1).strip())
            shown.append(f"{match.group(0)} ({note})" if isinstance(note, str) and note else match.group(0))
    if shown:
        facts.append(("LoRAs", " ".join(dict.fromkeys(shown))))
    names = list(embeddings)
    for label, text in (("embeddings", prompt), ("negative embeddings", negative)):
        used = embedding_names.named_in(lora_tags.TAG.sub(" ", text), names) if names else []
        if used:
            facts.append((label, ", ".join(used)))
    return facts


def short_time(stamp: Any) -> str:
    """An ISO timestamp from the store as "2026-11-29 22:41 UTC" (unchanged when not parseable)."""
    if not isinstance(stamp, str) or not stamp:
        return ""
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def duration(seconds: Any) -> str:
    """Seconds as "45 s", "12 min", "2 h 05 min" (empty for unknown)."""
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not math.isfinite(seconds):
        return ""
    seconds = max(0, int(round(seconds)))
    if seconds < 90:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def byte_amount(n: Any) -> str:
    """Bytes as "3.44 GB", "12 MB" (decimal units); empty for unknown. Mirrored in static/frame.js."""
    if not isinstance(n, (int, float)) or isinstance(n, bool) or not math.isfinite(n) or n < 0:
        return ""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}" if n < 100 * size else f"{n / size:.0f} {unit}"
    return f"{int(n)} B"


def fetch_line(render: Mapping[str, Any]) -> str:
    """"3.44 GB of weights per step (3.1 GB from the cache) · link 4.1 MB/s" (each part when known)."""
    parts = []
    if byte_amount(render.get("bytes_per_step")):
        cached = render.get("cache_bytes_per_step")
        parts.append(f"{byte_amount(render.get('bytes_per_step'))} of weights per step"
                     + (f" ({byte_amount(cached)} from the cache)" if cached else ""))
    if byte_amount(render.get("link_rate")) and render.get("link_rate"):
        parts.append(f"link {byte_amount(render.get('link_rate'))}/s")
    return " · ".join(parts)


def progress_title(kind: object) -> str:
    """The progress card's heading: a night's render, or one the owner asked for ("paint now")."""
    return "Painting tonight's picture" if kind in (None, "night") else "Painting a new picture now"


def progress_view(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """The render in progress from the daemon's live status (``LiveStatus.snapshot()`` shape).

    The same mapping is done in ``static/frame.js`` for the polled ``/api/status``; keep them in step.
    """
    render = (status or {}).get("render") or {}
    steps = render.get("steps")
    step = render.get("step") or 0
    percent = int(100 * step / steps) if isinstance(steps, int) and steps > 0 else None
    return {
        "active": bool(render),
        "title": progress_title(render.get("kind")),
        "stage": str(render.get("stage") or ""),
        "step": step,
        "steps": steps,
        "percent": percent,
        "eta": duration(render.get("eta_seconds")),
        "fetch": fetch_line(render),
        "restarts": render.get("restarts") or 0,
        "has_preview": bool(render.get("preview")),
        "step_choice": str(render.get("step_choice") or ""),
        "backend_note": str(render.get("backend_note") or ""),  # render server used, or why not
        "notice": str((status or {}).get("notice") or ""),
        "notice_details": str((status or {}).get("notice_details") or ""),
    }


def render_row_view(render: RenderRow) -> dict[str, Any]:
    """One row of the render history: times, and for a render that gave no picture the owner's
    sentence (``failure``) with the raw error kept as ``details`` (credentials in it redacted)."""
    error = redact_text(render.error) if render.error else None
    failed = render.status in ("failed", "missed")
    return dict(redact_deep(render.to_json()), started=short_time(render.started_at),
                finished=short_time(render.finished_at),
                failure=notices.render_failure(render.status, error) if failed else "", details=error or "")


def feed_view(feed: FeedHealth) -> dict[str, Any]:
    """One feed's health: times, and when its last fetch failed a sentence plus the error as details
    (the feed's URL and error lose their credentials)."""
    error = redact_text(feed.last_error) if feed.last_error else None
    return dict(redact_deep(feed.to_json()), last_ok=short_time(feed.last_ok_at),
                last_attempt=short_time(feed.last_attempt_at),
                failure=notices.feed_failure(feed.from_cache) if error else "",
                details=error or "")


def panel_view(display: Any) -> dict[str, Any]:
    """The configured panel in words for the preview's caption ("virtual panel, 800×480, spectra6
    inks"; a hardware panel by its model name, whose size and inks are its own) and how far the panel
    image is turned from upright (``display.rotate``)."""
    if display.panel == "virtual":
        label = f"virtual panel, {str(display.size).replace('x', '×')}, {display.palette} inks"
    elif display.panel == "inky":
        label = "the Inky panel found on the frame, with its measured inks"
    else:
        label = f"{display.panel}, with its measured inks"
    return {"label": label, "turned": int(display.rotate or 0)}
