"""What an owner may ask of a queued prompt, checked once for the JSON API and the phone page: its own
steps, sampler, guidance, seed and size, the strength of a "more like this" variation, and whether
the configured model can paint a variation at all.

Every check runs when the prompt is queued, so a mistake is a clear answer to the owner then, never a
failed night. What only the model can judge (a size its export's fixed axes refuse, a sampler its
kind cannot use) is checked again by the worker, which then paints with the night's settings and
says so in the picture's "why" rather than losing the night.

Standard library, ``frame.config`` and the store only: the daemon imports it at start.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

from frame.config import lora_tags, state_dir
from frame.config.checks import MAX_GUIDANCE
from frame.config.schema import Config, SamplerName
from frame.daemon.jobs import config_checks
from frame.daemon.store import gallery
from frame.daemon.store.database import Store
from frame.daemon.store.records import QueuedPrompt, StoredPicture
from frame.errors import FrameError
from frame.models import resolve_model_source
from frame.seeds import RANDOM, SEED_LIMIT

log = logging.getLogger(__name__)

SETTING_FIELDS = ("steps", "sampler", "guidance", "seed", "size")
MAX_STEPS = 1000  # the training timesteps of every model frame runs; the model's own limit may be lower (LCM: 50)
MAX_SIDE = 2048
VAE_STEP = 8  # every model's VAE needs multiples of 8 px; the model's own step (16 demo, 64 SD 1.5) is asked of it
STRENGTH_RANGE = (0.3, 0.8)  # below: hardly changes the picture; above: hardly keeps it
DEFAULT_STRENGTH = 0.6  # frame.diffusion.img2img.DEFAULT_STRENGTH (tests/daemon/test_queue.py ties them)
SAMPLERS = get_args(SamplerName)
STRONG_LIKE_STARS = 5  # "more like this" is recorded as the top of the star scale (frame.taste.ratings)
_WHOLE = re.compile(r"-?[0-9]{1,12}")  # ASCII digits only (str.isdigit() accepts "²")


class QueueError(ValueError):
    """A queued prompt's field is unusable; ``field`` names it for the owner's message. ``problems``
    holds every ``(field, message)`` found at once (the first is ``field``/``message``), so the owner
    fixes them all in one go instead of meeting the next one after each fix."""

    def __init__(self, field: str, message: str, problems: list[tuple[str, str]] | None = None) -> None:
        self.problems = problems or [(field, message)]
        super().__init__("; ".join(f"{name} {text}" for name, text in self.problems))
        self.field, self.message = self.problems[0]

    @classmethod
    def of(cls, problems: list[tuple[str, str]]) -> QueueError:
        return cls(*problems[0], problems=problems)


def _blank(value: Any) -> bool:
    """Nothing given: absent, null, or an empty form field (the night's setting)."""
    return value is None or (isinstance(value, str) and not value.strip())


def _integer(field: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise QueueError(field, f"must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise QueueError(field, f"must be from {low} to {high}, got {value}")
    return value


def _number(field: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise QueueError(field, f"must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise QueueError(field, f"must be a number, got {value!r}")
    if not low <= value <= high:
        raise QueueError(field, f"must be from {low:g} to {high:g}, got {value:g}")
    return float(value)


def parse_seed(value: Any) -> int | None:
    """A seed (0 .. 2^32-1), or None for random: blank or -1 (AUTOMATIC1111's convention)."""
    if _blank(value):
        return None
    seed = _integer("seed", value, RANDOM, SEED_LIMIT - 1)
    return None if seed == RANDOM else seed


def parse_size(value: Any) -> tuple[int | None, int | None]:
    """``"WxH"`` (sides up to 2048) → (width, height); blank → the night's size. The multiple a side
    must be is the model's, checked by ``parse_settings``."""
    if _blank(value):
        return None, None
    if not isinstance(value, str):
        raise QueueError("size", f"must be WIDTHxHEIGHT like 768x512, got {value!r}")
    parts = value.strip().lower().replace("×", "x").split("x")
    if len(parts) != 2 or not all(_WHOLE.fullmatch(p.strip()) and "-" not in p for p in parts):
        raise QueueError("size", f"must be WIDTHxHEIGHT like 768x512, got {value!r}")
    width, height = (int(p) for p in parts)
    if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE):
        raise QueueError("size", f"must have sides from 1 to {MAX_SIDE} pixels, got {value!r}")
    return width, height


def _parse_one(field: str, value: Any) -> dict[str, Any]:
    if field == "steps":
        return {"steps": None if _blank(value) else _integer("steps", value, 1, MAX_STEPS)}
    if field == "sampler":
        if not _blank(value) and value not in SAMPLERS:
            raise QueueError("sampler", f"must be one of {', '.join(SAMPLERS)}, got {value!r}")
        return {"sampler": None if _blank(value) else value}
    if field == "guidance":
        return {"guidance": None if _blank(value) else _number("guidance", value, 0.0, MAX_GUIDANCE)}
    if field == "seed":
        return {"seed": parse_seed(value)}
    width, height = parse_size(value)
    return {"width": width, "height": height}


def parse_settings(values: Mapping[str, Any], config: Config | None = None,
                   current: QueuedPrompt | None = None) -> dict[str, Any]:
    """The store's columns for the ``SETTING_FIELDS`` present in ``values`` (JSON values or form text);
    a blank one is None, the night's setting. With ``config``, the configured model's own rules apply
    too (size step, step limit, samplers: ``frame.worker.checks.queued_problems`` in the check child, the rule the night
    and the settings page apply), to the prompt as it will be (``current`` with these changes).
    Raises ``QueueError`` naming every bad field at once."""
    settings: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for field in SETTING_FIELDS:
        if field in values:
            try:
                settings.update(_parse_one(field, values[field]))
            except QueueError as exc:
                problems.extend(exc.problems)
    bad = {name for name, _ in problems}
    found = None
    if config is not None:
        prompt = {name: getattr(current, name) for name in ("steps", "sampler", "guidance", "width", "height")} \
            if current is not None else {}
        prompt.update(settings)
        found = _model_problems(config, prompt)
    if found is None:  # the model cannot be asked here (behind a URL): the rule every model's VAE has
        width, height = settings.get("width"), settings.get("height")
        found = [("size", f"must have sides that are multiples of {VAE_STEP} pixels, got {width}x{height}")] \
            if width and height and (width % VAE_STEP or height % VAE_STEP) else []
    problems.extend((name, _without_field(name, text)) for name, text in found if name not in bad)
    if problems:
        raise QueueError.of(problems)
    return settings


def _model_problems(config: Config, prompt: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """The configured model's rules on ``prompt``, asked of the check child (numpy and onnx stay out of
    the daemon); None when they cannot be asked (behind a URL, or the child failed: logged,
    and the night checks the prompt again before it paints)."""
    try:
        return config_checks.queued_problems(config, Path(state_dir(config)), prompt)
    except FrameError as exc:
        log.warning("queue: the model's rules could not be checked (%s); the size step of every model applies", exc)
        return None


def _without_field(field: str, message: str) -> str:
    """A model rule's message ("size 500x500 is not allowed: ...") as the form shows it after its field."""
    return message[len(field) + 1:] if message.startswith(f"{field} ") else message


def reused_settings(picture: StoredPicture) -> dict[str, Any]:
    """What "reuse seed" queues of ``picture``: its seed with the steps, sampler, guidance and size it was
    painted with, so the same prompt paints the same picture (the seed alone, under tonight's other
    settings, paints a different one). A stored value the queue's rules refuse (a sampler name from a
    render server, say) is left out, so the night's setting applies to it."""
    stored = {"seed": picture.seed, "steps": picture.steps, "sampler": picture.sampler,
              "guidance": picture.guidance,
              "size": f"{picture.width}x{picture.height}" if picture.width and picture.height else None}
    settings: dict[str, Any] = {}
    for field, value in stored.items():
        if value is None:
            continue
        try:
            settings.update(parse_settings({field: value}))
        except QueueError as exc:
            log.info("reuse seed of picture %d: its %s is not reused (%s)", picture.id, field, exc)
    return settings


def describe_settings(settings: Mapping[str, Any]) -> str:
    """``seed 1234, 20 steps, euler_a, guidance 7.5, 512x320``: a queued prompt's own settings for a message."""
    parts = [f"seed {settings['seed']}"] if settings.get("seed") is not None else []
    if settings.get("steps") is not None:
        parts.append(f"{settings['steps']} steps")
    if settings.get("sampler"):
        parts.append(str(settings["sampler"]))
    if settings.get("guidance") is not None:
        parts.append(f"guidance {settings['guidance']:g}")
    if settings.get("width") and settings.get("height"):
        parts.append(f"{settings['width']}x{settings['height']}")
    return ", ".join(parts)


def queue_reuse(store: Store, picture: StoredPicture) -> tuple[int, dict[str, Any]]:
    """Queue "reuse seed" of ``picture`` (its prompt with ``reused_settings``), the API's and the phone
    page's one path; the owner may edit the queued prompt before its night. Returns its id and settings.
    Raises ``QueueError`` (field ``seed``) when the picture has no stored seed (an uploaded photo)."""
    if picture.seed is None:
        raise QueueError("seed", f"of picture {picture.id} was not stored (an uploaded photo has none)")
    settings = reused_settings(picture)
    prompt_id = store.queue_prompt(picture.prompt, picture.negative_prompt, picture.theme, **settings)
    log.info("queued prompt %d: picture %d's prompt with %s", prompt_id, picture.id, describe_settings(settings))
    return prompt_id, settings


def parse_strength(value: Any) -> float:
    """A variation's strength: 0.3 (close to the picture) to 0.8 (freer); blank: 0.6."""
    if _blank(value):
        return DEFAULT_STRENGTH
    return _number("strength", value, *STRENGTH_RANGE)


def variation_problem(config: Config) -> str | None:
    """Why the configured model cannot paint "more like this" (it needs the VAE encoder of a diffusers
    ONNX export: ``vae_encoder/model.onnx``), or None. A model streamed over HTTP is not asked here
    (the daemon does no model I/O); its worker reports a missing encoder."""
    source = resolve_model_source(config.model.source)
    if "://" in source:
        return None
    folder = Path(source).expanduser()
    if not (folder / "model_index.json").is_file():
        return (f"the model in model.source ({config.model.source}) is not a diffusers ONNX export folder, so it "
                "has no VAE encoder: \"more like this\" needs one with vae_encoder/model.onnx")
    if not (folder / "vae_encoder" / "model.onnx").is_file():
        return (f"the model in model.source ({config.model.source}) has no vae_encoder/model.onnx, which "
                "\"more like this\" needs to start from a picture; export the model with its encoder "
                "(optimum-cli export onnx includes it) or use one that has it")
    return None


def queue_variation(config: Config, store: Store, state_dir: Path, picture: StoredPicture,
                    strength: Any) -> tuple[int, float]:
    """Queue "more like this" of ``picture`` (its prompt and seed, image-to-image from its gallery file at
    ``strength``) and rate it 5 stars: the strongest like the taste model learns, because asking for
    more of a picture says more than a thumb. The API's and the phone page's one path; returns the
    prompt's id and the strength.

    Raises ``QueueError``: field ``model`` when the configured model has no VAE encoder, ``strength``
    outside 0.3..0.8, ``picture`` when its file is gone. Nothing is stored then."""
    value = parse_strength(strength)
    problem = variation_problem(config)
    if problem:
        raise QueueError("model", problem)
    path = gallery.picture_path(state_dir, picture.file)
    if path is None or not path.is_file():
        raise QueueError("picture", f"{picture.id}'s image is missing from the gallery")
    prompt_id = store.queue_prompt(picture.prompt, picture.negative_prompt, picture.theme, seed=picture.seed,
                                   source_picture_id=picture.id, strength=value)
    store.rate(picture.id, "stars", STRONG_LIKE_STARS)
    log.info("queued prompt %d: a variation of picture %d at strength %.2f (rated %d stars)", prompt_id,
             picture.id, value, STRONG_LIKE_STARS)
    return prompt_id, value


def lora_problems(config: Config, texts: list[str | None]) -> tuple[list[str], list[str]]:
    """(problems, warnings) of the ``<lora:…>`` tags in a prompt's texts, for the API and the page: an
    unknown name or a bad scale (here), a file that cannot be used (malformed, NaN or inf values: the
    check child reads it) are problems, refused now rather than costing the night; a LoRA that matches
    no layer of the model is a warning. When the child cannot be asked, only the names are checked
    (logged), and the night leaves out a bad file."""
    clean = [text for text in texts if text]
    folders = lora_tags.configured_folders(config)
    problems = lora_tags.check_prompts(clean, folders)
    if problems or not any(lora_tags.split_tags(text)[1] for text in clean):
        return problems, []
    try:
        return config_checks.lora_findings(config, Path(state_dir(config)), clean)
    except FrameError as exc:
        log.warning("queue: the LoRA files could not be read (%s); the night leaves out a bad one", exc)
        return [], []
