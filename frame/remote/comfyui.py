"""The ComfyUI API subset frame speaks, as plain data: the workflow out, the answers in.

ComfyUI (``server.py`` and ``execution.py``; see docs/render-anywhere.md for the version followed)
paints an *API-format workflow*: a JSON object of nodes, ``{"3": {"class_type": "KSampler", "inputs":
{"seed": 42, "model": ["4", 0], ...}}, ...}``, where a two-item list links to another node's output.

* ``POST /prompt`` takes ``{"prompt": workflow, "client_id": ...}`` and answers ``{"prompt_id",
  "number", "node_errors"}``, or HTTP 400 ``{"error": {"type", "message", "details", "extra_info"},
  "node_errors": {node: {"errors": [...], "class_type", "dependent_outputs"}}}`` for a workflow it
  refuses (an unknown checkpoint: ``value_not_in_list``);
* ``GET /history/{prompt_id}`` answers ``{}`` until the job has run, then ``{prompt_id: {"prompt",
  "outputs": {node: {"images": [{"filename", "subfolder", "type"}]}}, "status": {"status_str":
  "success" | "error", "completed", "messages": [[event, {...}], ...]}}}``;
* ``GET /queue`` answers ``{"queue_running": [[number, prompt_id, ...]], "queue_pending": [...]}``;
* ``GET /view?filename=&subfolder=&type=`` sends the picture file itself (PNG);
* ``POST /upload/image`` (multipart ``image``, ``type``, ``overwrite``) answers ``{"name", "subfolder",
  "type"}``: the name a ``LoadImage`` node then reads (image-to-image);
* ``GET /object_info/CheckpointLoaderSimple`` lists the checkpoints (the reachability check);
* ``POST /interrupt`` (``{"prompt_id"}``) stops the running job, ``POST /queue`` ``{"delete": [id]}``
  drops a waiting one.

An owner's own workflow (exported with ComfyUI's "Export (API)") marks what frame fills in with
placeholders, ``PLACEHOLDERS`` below: a string input that is exactly ``"{{seed}}"`` becomes the number,
one inside a longer text (``"{{prompt}}, woodcut"``) is replaced as text. Nothing here touches the
network, so every rule is unit-tested on literal JSON.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from frame import jsonlimits
from frame.diffusion.pngmeta import GenerationParameters
from frame.remote.a1111 import RemoteJob
from frame.remote.errors import BAD_RESPONSE, SERVER_ERROR, RemoteUnavailable

PROMPT = "/prompt"
QUEUE = "/queue"
VIEW = "/view"
UPLOAD = "/upload/image"
INTERRUPT = "/interrupt"
CHECKPOINTS = "/object_info/CheckpointLoaderSimple"
MAX_WORKFLOW_BYTES = 1 << 20
# an API workflow nests 4 levels (node, inputs, a link); a big one holds a few thousand values
MAX_WORKFLOW_DEPTH = 32
MAX_WORKFLOW_VALUES = 100_000

PLACEHOLDERS = {  # name: what it becomes
    "prompt": "the prompt (text)", "negative": "the negative prompt (text)", "seed": "the seed (integer)",
    "steps": "the steps (integer)", "width": "the width in pixels", "height": "the height in pixels",
    "sampler": "ComfyUI's sampler_name (euler_ancestral, dpmpp_2m, ...)",
    "scheduler": "ComfyUI's scheduler (normal, karras, ...)", "guidance": "the CFG scale (number)",
    "cfg": "the same as guidance", "denoise": "the denoising strength (1.0 for text-to-image)",
    "image": "the uploaded picture's name for a LoadImage node (image-to-image)",
    "checkpoint": "render.remote.checkpoint, or the server's first checkpoint",
}
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")

# frame's sampler name -> ComfyUI's (sampler_name, scheduler)
SAMPLERS = {"euler_a": ("euler_ancestral", "normal"), "euler": ("euler", "normal"), "ddim": ("ddim", "ddim_uniform"),
            "dpm++2m": ("dpmpp_2m", "normal"), "dpm++2m_karras": ("dpmpp_2m", "karras"), "lcm": ("lcm", "sgm_uniform")}
_FRAME_SAMPLERS = {value: key for key, value in SAMPLERS.items()}
_SAMPLER_NODES = ("KSampler", "KSamplerAdvanced")


def mark(name: str) -> str:
    """``name`` as it is written in a workflow: ``{{name}}``."""
    return "{{" + name + "}}"


def _node(class_type: str, **inputs: Any) -> dict[str, Any]:
    return {"class_type": class_type, "inputs": inputs}


def default_workflow(img2img: bool) -> dict[str, Any]:
    """ComfyUI's own default graph in API format (its node numbers), with placeholders; image-to-image
    replaces the empty latent by the uploaded picture (LoadImage → VAEEncode) and denoises it partly."""
    workflow = {
        "4": _node("CheckpointLoaderSimple", ckpt_name="{{checkpoint}}"),
        "5": _node("EmptyLatentImage", width="{{width}}", height="{{height}}", batch_size=1),
        "6": _node("CLIPTextEncode", text="{{prompt}}", clip=["4", 1]),
        "7": _node("CLIPTextEncode", text="{{negative}}", clip=["4", 1]),
        "3": _node("KSampler", seed="{{seed}}", steps="{{steps}}", cfg="{{guidance}}", sampler_name="{{sampler}}",
                   scheduler="{{scheduler}}", denoise="{{denoise}}", model=["4", 0], positive=["6", 0],
                   negative=["7", 0], latent_image=["5", 0]),
        "8": _node("VAEDecode", samples=["3", 0], vae=["4", 2]),
        "9": _node("SaveImage", filename_prefix="frame", images=["8", 0]),
    }
    if img2img:
        del workflow["5"]
        workflow["10"] = _node("LoadImage", image="{{image}}")
        workflow["11"] = _node("VAEEncode", pixels=["10", 0], vae=["4", 2])
        workflow["3"]["inputs"]["latent_image"] = ["11", 0]
    return workflow


def check_workflow(data: Any, where: str = "the workflow") -> dict[str, Any]:
    """``data`` as an API-format workflow with a ``{{prompt}}``, or ValueError saying what is wrong."""
    if isinstance(data, dict) and "nodes" in data and "links" in data:
        raise ValueError(f"{where} is in ComfyUI's UI format; export it with \"Export (API)\" (ComfyUI's "
                         "Workflow menu) and point render.remote.workflow at that file")
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{where} is not a ComfyUI API-format workflow (a JSON object of nodes)")
    for node_id, node in data.items():
        if not (isinstance(node, dict) and isinstance(node.get("class_type"), str)
                and isinstance(node.get("inputs"), dict)):
            raise ValueError(f"{where}: node {node_id!r} has no \"class_type\" and \"inputs\"")
    names = set(_PLACEHOLDER.findall(json.dumps(data)))
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        raise ValueError(f"{where}: unknown placeholder {', '.join(map(mark, unknown))} (known: "
                         f"{', '.join(map(mark, PLACEHOLDERS))})")
    if "prompt" not in names:
        raise ValueError(f"{where} has no {{{{prompt}}}} placeholder: frame's prompt would not be painted")
    return data


def load_workflow(path: str) -> dict[str, Any]:
    """The owner's workflow file (``render.remote.workflow``), checked; ValueError naming what is wrong."""
    file = Path(path).expanduser()
    try:
        with open(file, "rb") as handle:
            raw = handle.read(MAX_WORKFLOW_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {file} ({exc.strerror or exc})") from None
    if len(raw) > MAX_WORKFLOW_BYTES:
        raise ValueError(f"{file} is larger than {MAX_WORKFLOW_BYTES >> 20} MB: not a workflow")
    try:
        data = jsonlimits.loads(raw.decode("utf-8"), MAX_WORKFLOW_DEPTH, MAX_WORKFLOW_VALUES)
    except jsonlimits.JsonLimitError as exc:
        raise ValueError(f"{file} is not a ComfyUI workflow: {exc}") from None
    except ValueError as exc:  # also a UnicodeDecodeError
        raise ValueError(f"{file} is not JSON ({exc})") from None
    return check_workflow(data, str(file))


def job_values(job: RemoteJob, checkpoint: str, image_name: str = "") -> dict[str, Any]:
    """What each placeholder becomes for ``job``."""
    sampler, scheduler = SAMPLERS.get(job.sampler, (job.sampler, "normal"))
    return {"prompt": job.prompt, "negative": job.negative_prompt, "seed": int(job.seed), "steps": int(job.steps),
            "width": int(job.width), "height": int(job.height), "sampler": sampler, "scheduler": scheduler,
            "guidance": float(job.guidance), "cfg": float(job.guidance),
            "denoise": float(job.denoising_strength) if job.init_image is not None else 1.0,
            "image": image_name, "checkpoint": checkpoint}


def fill(workflow: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``workflow`` with every placeholder replaced (whole strings keep the value's type)."""

    def replace(value: Any) -> Any:
        if isinstance(value, str):
            whole = _PLACEHOLDER.fullmatch(value)
            if whole:
                return values[whole.group(1)]
            return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), value)
        if isinstance(value, dict):
            return {key: replace(item) for key, item in value.items()}
        if isinstance(value, list):
            return [replace(item) for item in value]
        return value

    return replace(copy.deepcopy(workflow))


def uses(workflow: dict[str, Any], name: str) -> bool:
    return mark(name) in json.dumps(workflow)


def checkpoint_names(data: Any) -> list[str]:
    """The ``ckpt_name`` choices of ``GET /object_info/CheckpointLoaderSimple`` (the older ``[[names], {}]``
    form and the newer ``["COMBO", {"options": [names]}]`` one)."""
    try:
        spec = data["CheckpointLoaderSimple"]["input"]["required"]["ckpt_name"]
    except (KeyError, TypeError):
        raise RemoteUnavailable(BAD_RESPONSE, "the node list is not ComfyUI's (no CheckpointLoaderSimple)") from None
    if isinstance(spec, list) and spec and isinstance(spec[0], list):
        names = spec[0]
    elif isinstance(spec, list) and len(spec) > 1 and isinstance(spec[1], dict):
        names = spec[1].get("options") or []
    else:
        names = []
    return [name for name in names if isinstance(name, str)]


def prompt_id_of(data: Any) -> str:
    if isinstance(data, dict) and isinstance(data.get("prompt_id"), str) and data["prompt_id"]:
        return data["prompt_id"]
    raise RemoteUnavailable(BAD_RESPONSE, "the answer to POST /prompt has no prompt_id")


def history_entry(data: Any, prompt_id: str) -> dict[str, Any] | None:
    """The job's entry in a ``GET /history/{prompt_id}`` answer, or None while it has not run."""
    if not isinstance(data, dict):
        raise RemoteUnavailable(BAD_RESPONSE, "the history answer is not a JSON object")
    entry = data.get(prompt_id)
    return entry if isinstance(entry, dict) else None


def picture_ref(entry: dict[str, Any]) -> dict[str, str]:
    """``{"filename", "subfolder", "type"}`` of the job's first picture, or RemoteUnavailable: the job
    failed on the server (its exception message) or finished without one."""
    status = entry.get("status") if isinstance(entry.get("status"), dict) else {}
    if status.get("status_str") == "error":
        raise RemoteUnavailable(SERVER_ERROR, f"the workflow failed on the server: {_failure(status)}")
    outputs = entry.get("outputs") if isinstance(entry.get("outputs"), dict) else {}
    found = [image for output in outputs.values() if isinstance(output, dict)
             for image in (output.get("images") or []) if isinstance(image, dict)
             and isinstance(image.get("filename"), str) and image["filename"]]
    if not found:
        raise RemoteUnavailable(BAD_RESPONSE, "the workflow finished without a picture (no SaveImage or "
                                              "PreviewImage output)")
    image = next((i for i in found if i.get("type") == "output"), found[0])
    return {"filename": image["filename"], "subfolder": str(image.get("subfolder") or ""),
            "type": str(image.get("type") or "output")}


def _failure(status: dict[str, Any]) -> str:
    for message in status.get("messages") or []:
        if isinstance(message, list) and len(message) == 2 and isinstance(message[1], dict):
            event, data = message
            if event == "execution_error":
                return (f"{data.get('node_type', '?')} (node {data.get('node_id', '?')}): "
                        f"{data.get('exception_type', 'error')}: {data.get('exception_message', '')}".strip()[:300])
            if event == "execution_interrupted":
                return f"interrupted at {data.get('node_type', '?')} (node {data.get('node_id', '?')})"
    return "status error"


def queue_place(data: Any, prompt_id: str) -> int | None:
    """0 while the job runs, n when n jobs wait before it, None when the server does not know it."""
    if not isinstance(data, dict):
        raise RemoteUnavailable(BAD_RESPONSE, "the queue answer is not a JSON object")
    for item in data.get("queue_running") or []:
        if isinstance(item, list) and len(item) > 1 and item[1] == prompt_id:
            return 0
    pending = sorted((item for item in data.get("queue_pending") or [] if isinstance(item, list) and len(item) > 1),
                     key=lambda item: item[0] if isinstance(item[0], (int, float)) else 0)
    for index, item in enumerate(pending):
        if item[1] == prompt_id:
            return index + 1 + len(data.get("queue_running") or [])
    return None


def parameters_of(workflow: dict[str, Any], job: RemoteJob, checkpoint: str) -> GenerationParameters:
    """The picture's parameters as the workflow that was sent sets them (its KSampler and checkpoint
    loader), each one it does not show taken from the job: what is stored with the picture."""
    sampler_inputs: dict[str, Any] = next((node["inputs"] for node in workflow.values()
                                           if node.get("class_type") in _SAMPLER_NODES), {})
    loader = next((node["inputs"] for node in workflow.values()
                   if node.get("class_type") == "CheckpointLoaderSimple"), {})

    def number(key: str, kind: type, default: Any) -> Any:
        value = sampler_inputs.get(key)
        return kind(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default

    name, scheduler = sampler_inputs.get("sampler_name"), sampler_inputs.get("scheduler")
    sampler = job.sampler
    if isinstance(name, str):
        sampler = _FRAME_SAMPLERS.get((name, scheduler), f"{name} {scheduler}" if isinstance(scheduler, str) else name)
    denoise = number("denoise", float, None)
    model = loader.get("ckpt_name") if isinstance(loader.get("ckpt_name"), str) else checkpoint
    return GenerationParameters(
        prompt=job.prompt, negative_prompt=job.negative_prompt, steps=number("steps", int, job.steps),
        sampler=sampler, guidance=number("cfg", float, job.guidance),
        seed=number("noise_seed", int, number("seed", int, job.seed)), width=job.width, height=job.height,
        model=model or "comfyui", denoising_strength=denoise if job.init_image is not None else None)
