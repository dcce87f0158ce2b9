"""The Flask app of ``frame serve-render``: AUTOMATIC1111's API subset on frame's pipeline.

Routes (JSON as A1111 serves it, so A1111 clients work too): ``POST /sdapi/v1/txt2img`` and
``/sdapi/v1/img2img``, ``GET /sdapi/v1/progress``, ``GET /sdapi/v1/sd-models``, ``GET /sdapi/v1/options``.

img2img takes A1111's ``init_images`` (the first is painted from), ``denoising_strength`` (default
0.75) and ``resize_mode`` (see ``serve.img2img``) besides txt2img's fields, and runs
``Pipeline.generate(init_image=..., strength=...)``: the picture is fitted to ``width`` x ``height`` as
the frame's own image-to-image does, so a frame's picture sent back with the same seed paints exactly
what the frame would paint itself. A model without ``vae_encoder/model.onnx`` (OnnxStream folders, some
exports) answers img2img with 422 saying so. Both kinds wait in the same queue, one job at a time.

Every field is checked as A1111's API types it (``serve.render.fields``) before the job is queued: a
bad one is a 422 naming it, a picture larger than this machine's memory allows included. A body that is
not JSON is a 400; every error, the server's own included, is a JSON ``{"detail": ...}`` answer.

Every route needs the token: ``Authorization: Bearer TOKEN``, or HTTP basic auth with the token as
password (any user name), for clients that only know A1111's ``--api-auth``. Ten wrong tokens from one
address within five minutes lock it out for the rest of the window (429), as on the frame's own API.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
from typing import TYPE_CHECKING, Any

from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

import frame
from frame.diffusion.noise import sources as noise_sources
from frame.diffusion.pngmeta import png_bytes
from frame.diffusion.samplers.registry import SAMPLERS, a1111_names, frame_name
from frame.errors import UsageError
from frame.net.ratelimit import FailureLimiter
from frame.remote.a1111 import a1111_sampler
from frame.seeds import resolve_seed
from frame.serve.render import fields
from frame.serve.render import img2img as init_fields
from frame.serve.render.jobs import QueueFull, RenderQueue, RenderRequest

if TYPE_CHECKING:
    from frame.diffusion.pipeline import Pipeline
    from frame.diffusion.render_settings import RenderSettings

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 48 << 20  # txt2img: a few hundred bytes; img2img: a base64 photo (a 12 MP JPEG ~ 8 MB)
MAX_SIDE = 16384  # pixels; the memory limit (fields.pixel_limit) is far below any two such sides


class BadRequest(Exception):
    """A request frame cannot paint; answered 422 with ``detail`` as A1111/FastAPI do."""


class NotJson(Exception):
    """A body that does not parse as JSON; answered 400."""


def create_app(pipe: Pipeline, jobs: RenderQueue, token: str, model_name: str) -> Flask:
    app = Flask("frame.serve.render")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    limiter = FailureLimiter()
    max_pixels = fields.pixel_limit(fields.total_memory_bytes())
    log.info("the largest picture this server paints: %d pixels", max_pixels)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Any:
        return jsonify(error=exc.name, detail=exc.description or exc.name), exc.code

    @app.errorhandler(Exception)
    def server_error(exc: Exception) -> Any:
        log.exception("%s %s failed", request.method, request.path)
        return jsonify(error=type(exc).__name__, detail="internal error; the server's log has the details"), 500

    @app.before_request
    def authenticate() -> Any:
        address = request.remote_addr or "?"
        if limiter.blocked(address):
            return jsonify(detail="too many wrong tokens; try again later"), 429, {
                "Retry-After": str(limiter.retry_after(address))}
        if not _token_matches(request.headers.get("Authorization", ""), token):
            limiter.failed(address)
            return jsonify(detail="Not authenticated"), 401, {"WWW-Authenticate": 'Basic realm="frame"'}
        limiter.succeeded(address)
        return None

    @app.get("/sdapi/v1/sd-models")
    def sd_models() -> Any:
        return jsonify([{"title": model_name, "model_name": model_name, "hash": None, "sha256": None,
                         "filename": model_name, "config": None}])

    @app.get("/sdapi/v1/options")
    def options() -> Any:
        return jsonify(sd_model_checkpoint=model_name)

    @app.get("/sdapi/v1/progress")
    def progress() -> Any:
        skip = request.args.get("skip_current_image", "false").lower() in ("1", "true", "yes")
        return jsonify(jobs.progress(with_image=not skip))

    def paint(init: bool) -> Any:
        try:
            body = _json_body()
            request_ = _img2img_request(pipe, body, max_pixels) if init else \
                RenderRequest(_settings(pipe, body, max_pixels))
            future = jobs.submit(request_)
        except NotJson as exc:
            return jsonify(error="JSONDecodeError", detail=str(exc)), 400
        except BadRequest as exc:
            return jsonify(error="ValidationError", detail=str(exc)), 422
        except QueueFull as exc:
            return jsonify(error="Busy", detail=str(exc)), 503, {"Retry-After": "60"}
        try:
            image = future.result()
        except Exception as exc:  # noqa: BLE001 - the server's error, in A1111's error shape
            return jsonify(error=type(exc).__name__, detail=str(exc)), 500
        return jsonify(_answer(pipe, request_.settings, image, body, model_name))

    @app.post("/sdapi/v1/txt2img")
    def txt2img() -> Any:
        return paint(init=False)

    @app.post("/sdapi/v1/img2img")
    def img2img() -> Any:
        return paint(init=True)

    return app


def _token_matches(header: str, token: str) -> bool:
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "basic":
        try:
            value = base64.b64decode(value.strip(), validate=True).decode("latin-1").partition(":")[2]
        except (binascii.Error, ValueError):
            return False
    elif scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode("latin-1", "replace"), token.encode("latin-1"))


def _json_body() -> Any:
    """The request's JSON; NotJson for bytes that are not JSON or nest too deep to parse (a RecursionError
    in the parser, which Flask's ``get_json`` would let through as a 500)."""
    try:
        return json.loads(request.get_data(cache=False))
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
        raise NotJson(f"the body is not JSON ({reason})") from None


def _img2img_request(pipe: Pipeline, body: Any, max_pixels: int) -> RenderRequest:
    """An img2img request checked field by field (``serve.img2img``), the model's encoder included."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    try:
        pipe.vae_encoder_source()  # first: no other field can make up for a model without an encoder
    except UsageError as exc:
        raise BadRequest(f"init_images: this server's model cannot start from a picture: {exc}") from None
    try:
        strength = init_fields.denoising_strength(body)
        fields.boolean(body, "include_init_images")
        picture = init_fields.init_image(body)
        settings = _settings(pipe, body, max_pixels, strength)
        init_fields.check_steps(settings.steps, strength)
        picture = init_fields.resized(picture, body, settings.width, settings.height)
    except (init_fields.FieldError, fields.FieldError) as exc:
        raise BadRequest(str(exc)) from None
    return RenderRequest(settings, picture)


def _settings(pipe: Pipeline, body: Any, max_pixels: int, strength: float | None = None) -> RenderSettings:
    """The request's values, checked, as the pipeline's resolved ``RenderSettings``; BadRequest names a bad one."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    try:
        for key in ("batch_size", "n_iter"):
            if fields.integer(body, key) not in (1, None):
                raise fields.FieldError(f"{key} must be 1: frame paints one picture per request")
        prompt, negative = fields.text(body, "prompt") or "", fields.text(body, "negative_prompt") or ""
        name, index = fields.text(body, "sampler_name"), fields.text(body, "sampler_index")
        steps = fields.integer(body, "steps", 1, fields.MAX_STEPS)
        width, height = fields.integer(body, "width", 1, MAX_SIDE), fields.integer(body, "height", 1, MAX_SIDE)
        guidance = fields.number(body, "cfg_scale", 0.0, fields.MAX_CFG_SCALE)
        seed = fields.integer(body, "seed", -1, 2**63 - 1)
    except fields.FieldError as exc:
        raise BadRequest(str(exc)) from None
    sampler = name or index
    if sampler is not None:
        sampler = frame_name(sampler) or sampler
        if sampler not in SAMPLERS:
            raise BadRequest(f"sampler_name: unknown sampler {name or index!r} (known: "
                             f"{', '.join(a1111_names().values())})")
    seed = resolve_seed(seed)  # "random" decided here, where the request is made: answered with the number
    if width is not None and height is not None:  # before the model's rules, which may name another problem
        _check_size(width, height, max_pixels)
    try:
        settings = pipe.settings(prompt, negative, steps, guidance, sampler, seed, width, height, strength,
                                 _noise(body))
    except (UsageError, TypeError, ValueError) as exc:
        raise BadRequest(str(exc)) from None
    _check_size(settings.width, settings.height, max_pixels)  # a missing side is the model's default
    return settings


def _noise(body: dict) -> str | None:
    """The noise source an A1111 client asks for in ``override_settings.randn_source`` ("CPU": torch's
    CPU generator, "NV": A1111's Philox); None (the server's ``model.noise``) for "GPU" or none."""
    overrides = body.get("override_settings")
    source = overrides.get("randn_source") if isinstance(overrides, dict) else None
    return noise_sources.from_a1111(source) if isinstance(source, str) else None


def _check_size(width: int, height: int, max_pixels: int) -> None:
    try:
        fields.check_size(width, height, max_pixels)
    except fields.FieldError as exc:
        raise BadRequest(str(exc)) from None


def _answer(pipe: Pipeline, settings: RenderSettings, image: Any, body: dict, model_name: str) -> dict[str, Any]:
    """A1111's answer: the PNG (with its parameters chunk), the request echoed (without the init
    images unless ``include_init_images``, as A1111), ``info`` as JSON text."""
    params = pipe.parameters(settings)
    infotext = image.info.get("parameters") or params.to_text()
    info = {
        "prompt": params.prompt, "all_prompts": [params.prompt], "negative_prompt": params.negative_prompt,
        "all_negative_prompts": [params.negative_prompt], "seed": params.seed, "all_seeds": [params.seed],
        "subseed": -1, "all_subseeds": [-1], "subseed_strength": 0, "width": params.width, "height": params.height,
        "sampler_name": a1111_sampler(params.sampler), "cfg_scale": params.guidance, "steps": params.steps,
        "batch_size": 1, "sd_model_name": model_name, "sd_model_hash": None,
        "denoising_strength": settings.strength,
        "index_of_first_image": 0, "infotexts": [infotext], "version": f"frame {frame.__version__}",
    }
    encoded = base64.b64encode(png_bytes(image, infotext)).decode("ascii")
    if "init_images" in body and not body.get("include_init_images"):
        body = {**body, "init_images": None}
    return {"images": [encoded], "parameters": body, "info": json.dumps(info)}
