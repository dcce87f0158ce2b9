"""The AUTOMATIC1111 web API subset frame speaks, as plain data: requests out, answers in.

AUTOMATIC1111, Forge and SD.Next serve the same JSON (``/sdapi/v1/...``, schema from A1111's
``modules/api/models.py`` and ``processing.py``):

* ``POST txt2img`` / ``img2img`` take ``prompt``, ``negative_prompt``, ``steps``, ``sampler_name``,
  ``cfg_scale``, ``seed``, ``width``, ``height`` (img2img adds ``init_images``, a list of base64 images,
  and ``denoising_strength``) and answer ``{"images": [base64...], "parameters": {...}, "info": "<JSON
  text>"}``; ``info`` holds ``seed``, ``sampler_name``, ``cfg_scale``, ``steps``, ``width``, ``height``,
  ``sd_model_name`` (newer versions) and ``infotexts`` (the "parameters" text of each picture);
* ``GET progress`` answers ``progress`` (0-1), ``eta_relative`` (seconds), ``state`` (``job_count``,
  ``sampling_step``, ``sampling_steps``, ...) and ``current_image`` (base64 live preview or null);
* ``GET sd-models`` lists ``{"title", "model_name", "hash", "sha256", "filename", "config"}``.

Nothing here touches the network, so every rule is unit-tested on literal JSON.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

from frame.diffusion.pngmeta import GenerationParameters
from frame.diffusion.samplers.registry import a1111_name, frame_name
from frame.remote.errors import BAD_RESPONSE, RemoteUnavailable

TXT2IMG = "/sdapi/v1/txt2img"
IMG2IMG = "/sdapi/v1/img2img"
PROGRESS = "/sdapi/v1/progress"
SD_MODELS = "/sdapi/v1/sd-models"
INTERRUPT = "/sdapi/v1/interrupt"

_SCHEDULE_TYPE = re.compile(r"(?:^|, )Schedule type: ([^,\n]+)")
_MODEL = re.compile(r"(?:^|, )Model: (\"(?:[^\"\\]|\\.)*\"|[^,\n]+)")


@dataclass(frozen=True)
class RemoteJob:
    """One picture to paint remotely, in frame's units (sampler names as in ``model.sampler``).

    ``init_image`` (PNG or JPEG bytes) makes it an img2img job with ``denoising_strength``.
    """

    prompt: str
    negative_prompt: str
    steps: int
    guidance: float
    sampler: str
    seed: int
    width: int
    height: int
    init_image: bytes | None = None
    denoising_strength: float = 0.75

    @property
    def endpoint(self) -> str:
        return IMG2IMG if self.init_image is not None else TXT2IMG


def a1111_sampler(name: str) -> str:
    """frame's sampler name → A1111's ("dpm++2m_karras" → "DPM++ 2M Karras"); other names unchanged.

    The combined "<sampler> Karras" names are what every A1111 version accepts (1.9+ splits them into
    sampler and ``scheduler`` itself)."""
    return a1111_name(name)


def frame_sampler(name: str, infotext: str = "") -> str:
    """A1111's sampler name (+ the infotext's "Schedule type", A1111 1.9+) → frame's, when frame knows it."""
    schedule = _SCHEDULE_TYPE.search(infotext or "")
    if schedule and schedule.group(1).strip().lower() == "karras" and not name.endswith("Karras"):
        name = f"{name} Karras"
    return frame_name(name) or name


def request_payload(job: RemoteJob) -> dict[str, Any]:
    """The JSON body of the txt2img / img2img request for ``job`` (one picture, nothing saved server-side)."""
    payload: dict[str, Any] = {
        "prompt": job.prompt, "negative_prompt": job.negative_prompt, "steps": int(job.steps),
        "sampler_name": a1111_sampler(job.sampler), "cfg_scale": float(job.guidance), "seed": int(job.seed),
        "width": int(job.width), "height": int(job.height), "batch_size": 1, "n_iter": 1,
        "send_images": True, "save_images": False,
    }
    if job.init_image is not None:
        payload["init_images"] = [base64.b64encode(job.init_image).decode("ascii")]
        payload["denoising_strength"] = float(job.denoising_strength)
    return payload


def answer_image_and_info(data: Any) -> tuple[str, dict[str, Any]]:
    """The first base64 image and the decoded ``info`` of a txt2img/img2img answer."""
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise RemoteUnavailable(BAD_RESPONSE, "the answer is not an AUTOMATIC1111 image answer (no \"images\")")
    if not data["images"]:
        raise RemoteUnavailable(BAD_RESPONSE, "the answer holds no picture")
    info = data.get("info") or {}
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            info = {}
    return data["images"][0], info if isinstance(info, dict) else {}


def parameters_from_info(info: dict[str, Any], job: RemoteJob, fallback_model: str) -> GenerationParameters:
    """The picture's parameters as the server reports them (``info``), each missing one taken from
    the job that was sent: what is stored with the picture, as for a local render."""
    infotexts = info.get("infotexts")
    infotext = infotexts[0] if isinstance(infotexts, list) and infotexts and isinstance(infotexts[0], str) else ""

    def pick(key: str, kind: type, default: Any) -> Any:
        value = info.get(key)
        try:
            return kind(value) if value is not None and not isinstance(value, bool) else default
        except (TypeError, ValueError):
            return default

    sampler = info.get("sampler_name")
    return GenerationParameters(
        prompt=pick("prompt", str, job.prompt), negative_prompt=pick("negative_prompt", str, job.negative_prompt),
        steps=pick("steps", int, job.steps),
        sampler=frame_sampler(sampler, infotext) if isinstance(sampler, str) and sampler else job.sampler,
        guidance=pick("cfg_scale", float, job.guidance), seed=pick("seed", int, job.seed),
        width=pick("width", int, job.width), height=pick("height", int, job.height),
        model=_model_name(info, infotext) or fallback_model)


def _model_name(info: dict[str, Any], infotext: str) -> str:
    name = info.get("sd_model_name")
    if isinstance(name, str) and name:
        return name
    match = _MODEL.search(infotext)
    if not match:
        return ""
    value = match.group(1).strip()
    if value.startswith('"'):
        try:
            return str(json.loads(value))
        except ValueError:
            return value.strip('"')
    return value


@dataclass(frozen=True)
class ProgressSnapshot:
    """One ``GET /sdapi/v1/progress`` answer; ``active`` is False while the server runs no job."""

    fraction: float
    eta_seconds: float | None
    step: int
    steps: int
    active: bool
    preview_b64: str | None


def parse_progress(data: Any) -> ProgressSnapshot:
    if not isinstance(data, dict):
        raise RemoteUnavailable(BAD_RESPONSE, "the progress answer is not a JSON object")
    state = data.get("state") if isinstance(data.get("state"), dict) else {}

    def number(value: Any, default: float) -> float:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default

    eta = number(data.get("eta_relative"), -1.0)
    preview = data.get("current_image")
    return ProgressSnapshot(
        fraction=min(1.0, max(0.0, number(data.get("progress"), 0.0))),
        eta_seconds=eta if eta >= 0 else None,
        step=int(number(state.get("sampling_step"), 0)), steps=int(number(state.get("sampling_steps"), 0)),
        active=number(state.get("job_count"), 0) != 0,
        preview_b64=preview if isinstance(preview, str) and preview else None)


def model_titles(data: Any) -> list[str]:
    """The checkpoint titles of a ``GET /sdapi/v1/sd-models`` answer."""
    if not isinstance(data, list):
        raise RemoteUnavailable(BAD_RESPONSE, "the model list is not a JSON list (is this an AUTOMATIC1111 API?)")
    return [str(item.get("title") or item.get("model_name") or "?") for item in data if isinstance(item, dict)]


def comfy_node_errors(node_errors: Any, most: int = 4) -> list[str]:
    """ComfyUI's reasons per node, ``"CheckpointLoaderSimple (node 4): Value not in list: ckpt_name: ..."``.

    Its ``error.details`` lists only the reasons of the output nodes themselves (``execution.py``'s
    ``validate_prompt``): a checkpoint it does not have fails upstream of SaveImage, so ``details`` is
    empty and the reason is only in ``node_errors``."""
    found: list[str] = []
    if not isinstance(node_errors, dict):
        return found
    for node_id, node in list(node_errors.items())[:most]:
        reasons = node.get("errors") if isinstance(node, dict) else None
        for reason in (reasons if isinstance(reasons, list) else [])[:2]:
            if isinstance(reason, dict) and isinstance(reason.get("message"), str):
                details = reason.get("details") if isinstance(reason.get("details"), str) else ""
                kind = node.get("class_type") if isinstance(node.get("class_type"), str) else "?"
                found.append(f"{kind[:60]} (node {str(node_id)[:40]}): {reason['message'][:100]}"
                             + (f": {details[:200]}" if details else ""))
    return found


def error_detail(data: Any) -> str:
    """The server's own words from an error answer: FastAPI's ``detail``, A1111's ``error``/``errors``,
    or ComfyUI's ``{"error": {"message", "details"}, "node_errors": ...}``."""
    if isinstance(data, dict):
        for key in ("detail", "errors", "error", "message"):
            value = data.get(key)
            if isinstance(value, dict) and isinstance(value.get("message"), str):  # ComfyUI
                details = value.get("details") if isinstance(value.get("details"), str) else ""
                parts = [details] if details else []
                parts += [reason for reason in comfy_node_errors(data.get("node_errors"))  # not said twice
                          if not details or reason.split("): ", 1)[-1] not in details]
                return (value["message"] + (": " + "; ".join(parts) if parts else ""))[:300]
            if value:
                text = value if isinstance(value, str) else json.dumps(value)
                return text[:300]
    return ""
