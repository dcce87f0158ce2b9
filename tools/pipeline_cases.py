"""Generation cases for the pipeline fixtures and the recorder that runs diffusers on them.

Each case fixes everything diffusers' output depends on: prompt, negative prompt, steps, guidance,
size, the scheduler (class + config), the starting noise (``latents=``) and, for the two samplers
that draw noise inside ``step`` (Euler ancestral, LCM), every per-step noise tensor. Recorded per
case: the final image (output_type="np"), the latents after every step (the last one is what the
VAE decodes), the prompt embeddings, the token ids and (SDXL) the add_time_ids.

Image-to-image cases (``strength`` set) run StableDiffusionImg2ImgPipeline /
StableDiffusionXLImg2ImgPipeline (``from_pipe`` of the same components) on a picture from ``init/``
(fitted first with diffusers' own ``image_processor.resize(..., resize_mode="crop")`` when its size
differs from the render size). Their two extra random draws are recorded too: the VAE posterior's
``posterior_noise`` (``latent_dist.sample(generator)`` in ``retrieve_latents``) and the noise
``prepare_latents`` adds (``noise``), plus the start latent (``init_latents``) after ``add_noise``.
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

# frame sampler name -> (diffusers scheduler class, config overrides)
SAMPLERS: dict[str, tuple[str, dict[str, Any]]] = {
    "euler": ("EulerDiscreteScheduler", {}),
    "euler_a": ("EulerAncestralDiscreteScheduler", {}),
    "ddim": ("DDIMScheduler", {}),
    "dpm++2m": ("DPMSolverMultistepScheduler", {"use_karras_sigmas": False}),
    "dpm++2m_karras": ("DPMSolverMultistepScheduler", {"use_karras_sigmas": True}),
    "lcm": ("LCMScheduler", {}),
}
# Schedulers whose step() draws noise through diffusers.utils.torch_utils.randn_tensor.
NOISY_MODULES = {
    "EulerAncestralDiscreteScheduler": "diffusers.schedulers.scheduling_euler_ancestral_discrete",
    "LCMScheduler": "diffusers.schedulers.scheduling_lcm",
}


@dataclass(frozen=True)
class Case:
    """One recorded generation."""

    name: str
    sampler: str
    prompt: str
    negative_prompt: str | None  # None = diffusers' negative_prompt=None (SDXL: all-zero negatives)
    steps: int
    guidance: float
    width: int
    height: int
    noise: str  # file in noise/ holding the (1, 4, height/8, width/8) standard-normal start
    scheduler_overrides: dict[str, Any] = field(default_factory=dict)
    notes: str = ""
    # The scheduler_config.json of this case's folder when it is not the model folder's own (as diffusers
    # saved it): the same weights with another scheduler file, as an owner's export might ship.
    scheduler_config: dict[str, Any] | None = None
    strength: float | None = None  # image-to-image: the share of the schedule that runs
    init_image: str | None = None  # image-to-image: file in init/ (any size; fitted to width x height)


def make_scheduler(case: Case, base_config: dict[str, Any]):
    """The diffusers scheduler for a case: class.from_config(scheduler_config.json, **overrides), the
    file being the case's own (``scheduler_config``) or the model folder's (``base_config``), read as
    a pipeline loaded from that folder reads it."""
    import diffusers

    cls_name, overrides = SAMPLERS[case.sampler]
    cls = getattr(diffusers, cls_name)
    return cls.from_config(case.scheduler_config or base_config, **{**overrides, **case.scheduler_overrides})


@contextlib.contextmanager
def recorded_step_noise(scheduler, seed: int, sink: list[np.ndarray], replay: np.ndarray | None = None):
    """Feed the scheduler's in-step noise from a seeded numpy generator and record every draw.

    diffusers draws this noise with torch's RNG, which no numpy program can reproduce; recording it
    lets frame's sampler replay the same values and match exactly. With ``replay`` the recorded
    draws are fed back in order instead.
    """
    module_name = NOISY_MODULES.get(type(scheduler).__name__)
    if module_name is None:
        yield
        return
    module = importlib.import_module(module_name)
    original = module.randn_tensor
    rng = np.random.default_rng(seed)

    def fake_randn(shape, generator=None, device=None, dtype=None, layout=None):
        if replay is not None:
            arr = replay[len(sink)]
        else:
            arr = rng.standard_normal(tuple(shape)).astype(np.float32)
        sink.append(arr)
        return torch.from_numpy(np.array(arr, copy=True)).to(dtype=dtype or torch.float32)

    module.randn_tensor = fake_randn
    try:
        yield
    finally:
        module.randn_tensor = original


IMG2IMG_MODULES = {
    "posterior_noise": "diffusers.models.autoencoders.vae",  # DiagonalGaussianDistribution.sample
    "noise": None,  # the pipeline's own module (prepare_latents)
}


@contextlib.contextmanager
def recorded_img2img_noise(pipe, seed: int, sink: dict[str, np.ndarray], posterior_mean: bool = False):
    """Seeded numpy draws for the VAE posterior and for prepare_latents' noise, recorded by name.

    ``posterior_mean``: the posterior draw is zeros, i.e. the latent is the posterior mean.
    """
    rng = np.random.default_rng(seed)
    patched = []
    for name, module_name in IMG2IMG_MODULES.items():
        module = importlib.import_module(module_name or type(pipe).__module__)

        def fake_randn(shape, generator=None, device=None, dtype=None, layout=None, name=name):
            arr = rng.standard_normal(tuple(shape)).astype(np.float32)
            if posterior_mean and name == "posterior_noise":
                arr = np.zeros_like(arr)
            assert name not in sink, f"{name} drawn twice"
            sink[name] = arr
            return torch.from_numpy(arr.copy()).to(dtype=dtype or torch.float32)

        patched.append((module, module.randn_tensor))
        module.randn_tensor = fake_randn
    try:
        yield
    finally:
        for module, original in patched:
            module.randn_tensor = original


def img2img_pipe(pipe, sdxl: bool):
    """The image-to-image pipeline on the same components and config."""
    import diffusers

    if sdxl:
        return diffusers.StableDiffusionXLImg2ImgPipeline.from_pipe(pipe, add_watermarker=False)
    return diffusers.StableDiffusionImg2ImgPipeline.from_pipe(pipe, requires_safety_checker=False)


def fitted_picture(pipe, picture, case: Case):
    """diffusers' cover-and-centre-crop of the init picture to the render size (its ``resize_mode="crop"``)."""
    if picture.size == (case.width, case.height):
        return picture
    return pipe.image_processor.resize(picture, case.height, case.width, resize_mode="crop")


def _token_ids(tokenizer, text: str) -> np.ndarray:
    ids = tokenizer(text, padding="max_length", max_length=tokenizer.model_max_length, truncation=True,
                    return_tensors="np").input_ids
    return ids.astype(np.int64)


def encode(pipe, case: Case, sdxl: bool) -> dict[str, np.ndarray]:
    """Prompt embeddings exactly as the pipeline computes them, plus the token ids behind them."""
    cfg = case.guidance > 1.0
    out: dict[str, np.ndarray] = {}
    with torch.no_grad():
        if sdxl:
            pe, npe, pooled, npooled = pipe.encode_prompt(case.prompt, device="cpu", num_images_per_prompt=1,
                                                          do_classifier_free_guidance=cfg,
                                                          negative_prompt=case.negative_prompt)
            out["pooled_prompt_embeds"] = pooled.numpy()
            if cfg:
                out["negative_pooled_prompt_embeds"] = npooled.numpy()
        else:
            pe, npe = pipe.encode_prompt(case.prompt, "cpu", 1, cfg, negative_prompt=case.negative_prompt)
    out["prompt_embeds"] = pe.numpy()
    if cfg:
        out["negative_prompt_embeds"] = npe.numpy()
    tokenizers = [("", pipe.tokenizer)] + ([("_2", pipe.tokenizer_2)] if sdxl else [])
    for suffix, tok in tokenizers:
        out[f"input_ids{suffix}"] = _token_ids(tok, case.prompt)
        if case.negative_prompt is not None:
            out[f"negative_input_ids{suffix}"] = _token_ids(tok, case.negative_prompt)
    return out


def run_case(pipe, case: Case, base_config: dict[str, Any], noise: np.ndarray | None, sdxl: bool,
             seed: int, picture=None, img2img_seed: int | None = None, posterior_mean: bool = False,
             **pipe_kwargs: Any
             ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Run diffusers' pipeline for one case; returns (arrays for the .npz, scheduler description).

    Text-to-image cases start from ``noise``; image-to-image cases (``case.strength``) from
    ``picture`` (a PIL image), with their two draws seeded by ``img2img_seed`` (default ``seed + 1``)
    and recorded; ``seed`` seeds the schedulers' in-step noise.
    """
    if case.strength is not None:
        pipe = img2img_pipe(pipe, sdxl)
    pipe.scheduler = make_scheduler(case, base_config)
    arrays = encode(pipe, case, sdxl)
    steps: list[np.ndarray] = []
    step_noise: list[np.ndarray] = []
    extra: dict[str, np.ndarray] = {}

    def on_step_end(_pipe, i, t, kwargs):
        steps.append(kwargs["latents"].numpy().copy())
        if sdxl and i == 0:
            extra["add_time_ids"] = kwargs["add_time_ids"].numpy().copy()
            extra["add_text_embeds"] = kwargs["add_text_embeds"].numpy().copy()
        return {}

    tensor_inputs = ["latents", "add_time_ids", "add_text_embeds"] if sdxl else ["latents"]
    drawn: dict[str, np.ndarray] = {}
    if case.strength is None:
        start = {"latents": torch.from_numpy(noise.copy()), "width": case.width, "height": case.height}
        recording = contextlib.nullcontext()
    else:
        fitted = fitted_picture(pipe, picture, case)
        start = {"image": fitted, "strength": case.strength}
        recording = recorded_img2img_noise(pipe, seed + 1 if img2img_seed is None else img2img_seed, drawn,
                                           posterior_mean)
        arrays["init_pixels"] = np.asarray(fitted, dtype=np.uint8)
        prepare = pipe.prepare_latents

        def recorded_prepare(*args, **kwargs):
            latents = prepare(*args, **kwargs)
            arrays["init_latents"] = latents.numpy().copy()
            return latents

        pipe.prepare_latents = recorded_prepare
    with torch.no_grad(), recorded_step_noise(pipe.scheduler, seed, step_noise), recording:
        result = pipe(prompt=case.prompt, negative_prompt=case.negative_prompt, num_inference_steps=case.steps,
                      guidance_scale=case.guidance, output_type="np", callback_on_step_end=on_step_end,
                      callback_on_step_end_tensor_inputs=tensor_inputs, **start, **pipe_kwargs)
    arrays.update(extra)
    arrays.update(drawn)
    arrays["image"] = np.asarray(result.images, dtype=np.float32)
    arrays["step_latents"] = np.stack(steps)
    arrays["latents"] = steps[-1]
    arrays["timesteps"] = pipe.scheduler.timesteps.numpy().astype(np.float64)
    if step_noise:
        arrays["step_noise"] = np.stack(step_noise)
    scheduler = {"class": type(pipe.scheduler).__name__, "config": _jsonable(dict(pipe.scheduler.config))}
    return arrays, scheduler


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB for images in [0, 1]."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * float(np.log10(1.0 / mse))


def sensitivity(pipe, case: Case, base_config: dict[str, Any], noise: np.ndarray | None, sdxl: bool,
                image: np.ndarray, seed: int = 0, picture=None) -> dict[str, float]:
    """PSNR of the case's image against images made with one parameter changed.

    Documents that a frame image within 40 dB of the reference really used the same prompt,
    guidance, sampler, steps (and SDXL time_ids): each change lands well below 40 dB. Image-to-image
    cases also change the strength, the picture (mirrored) and the VAE posterior / added noise draws.
    """
    other_sampler = "dpm++2m_karras" if case.sampler != "dpm++2m_karras" else "euler"
    variants: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "prompt 'a red apple'": ({"prompt": "a red apple"}, {}),
        "steps +1": ({"steps": case.steps + 1}, {}),
        f"sampler {other_sampler}": ({"sampler": other_sampler}, {}),
    }
    if case.guidance + 1.0 > 1.0:  # guidance <= 1 means no unconditional pass in diffusers
        variants["guidance +1"] = ({"guidance": case.guidance + 1.0}, {})
    if case.guidance > 1.0:  # without guidance the negative prompt is not used
        variants["negative prompt changed"] = ({"negative_prompt": "ugly" if case.negative_prompt else NEG_ALT},
                                               {})
    if sdxl:
        variants["time_ids original_size 128x128"] = ({}, {"original_size": (128, 128)})
    if case.strength is not None:
        other = other_strength(case.steps, case.strength)
        variants[f"strength {other:g}"] = ({"strength": other}, {})
        variants["picture mirrored"] = ({}, {"picture": picture.transpose(0)})
        variants["posterior and added noise redrawn"] = ({}, {"img2img_seed": seed + 100})
        variants["posterior mean instead of a sample"] = ({}, {"posterior_mean": True})
    out = {}
    for label, (changes, kwargs) in variants.items():
        changed = Case(**{**asdict(case), **changes})
        kwargs = {"picture": picture, **kwargs}
        arrays, _ = run_case(pipe, changed, base_config, noise, sdxl, seed, **kwargs)
        out[label] = round(psnr(image, arrays["image"]), 1)
    return out


NEG_ALT = "ugly, grainy"


def other_strength(steps: int, strength: float) -> float:
    """The nearest strength 0.2 or more away that runs a different number of steps."""
    for delta in (0.2, 0.3, 0.4, 0.5):
        for other in (strength - delta, strength + delta):
            other = round(other, 2)
            if 0 < other <= 1 and int(steps * other) != int(steps * strength) and int(steps * other) >= 1:
                return other
    raise ValueError(f"no other strength for {steps} steps at {strength}")


def describe(case: Case) -> dict[str, Any]:
    """The case as plain JSON data (``scheduler_config`` only where the case has its own; text-to-image
    cases without the image-to-image fields)."""
    data = asdict(case)
    if data["scheduler_config"] is None:
        del data["scheduler_config"]
    if case.strength is None:
        data.pop("strength")
        data.pop("init_image")
    return data
