"""``frame render``: one picture from the command line, with a progress bar on stderr.

Import-light on purpose: numpy and the pipeline load inside the handler. Unset options come from the
configuration's ``model`` section (source, sampler, steps, guidance, negative prompt, size, VAE tiles,
weights provider); ``--size auto`` picks a size for the panel's aspect ratio (``display.size``).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, TextIO, get_args

from frame.config.schema import NoiseName, SamplerName
from frame.errors import Interrupted, UsageError

if TYPE_CHECKING:
    from frame.diffusion.progress import Progress

# the owner-facing sampler names (the registry, frame.diffusion.samplers, refuses any other; not imported
# here: it needs numpy, and `frame --help` imports every command module)
SAMPLERS = get_args(SamplerName)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "render", help="generate one picture with Stable Diffusion",
        description="Paint one picture with the configured model (or --model) on this computer, without the "
                    "daemon, and write it to --out with its parameters. Bad options and files are refused "
                    "before the model loads (exit 2).")
    parser.add_argument("--model", metavar="SRC", help="diffusers ONNX export folder or http(s) URL "
                        "(default: model.source from the configuration; 'demo' = the bundled demo model)")
    parser.add_argument("--prompt", help="what to paint (A1111 emphasis like (word:1.3) works)")
    parser.add_argument("--negative", metavar="TEXT", help="negative prompt (default: model.negative_prompt)")
    parser.add_argument("--steps", type=int, metavar="N",
                        help="denoising steps (default: model.steps, else the model's: 20, Turbo 1, the demo 8)")
    parser.add_argument("--guidance", type=float, metavar="G", help="classifier-free guidance scale")
    parser.add_argument("--sampler", metavar="NAME",
                        help=f"{', '.join(SAMPLERS[:-1])} or {SAMPLERS[-1]} (default: model.sampler)")
    parser.add_argument("--seed", type=int, default=-1, metavar="N",
                        help="seed of the starting noise; -1 (the default) picks a random one, printed and "
                             "stored in the picture")
    parser.add_argument("--noise", choices=get_args(NoiseName),
                        help="where the seed's random numbers come from: frame, torch-cpu (ComfyUI, diffusers, "
                             "A1111 RNG CPU) or a1111-nv (A1111 RNG NV) (default: model.noise)")
    parser.add_argument("--size", metavar="WxH", help="image size like 512x320, or 'auto' (default: model.size)")
    parser.add_argument("--out", required=True, metavar="FILE.png",
                        help="where to write the picture: .png, .jpg/.jpeg or .webp (checked before the render)")
    parser.add_argument("--init-noise", metavar="FILE.npy", help="start from this standard-normal latent noise")
    parser.add_argument("--save-latents", metavar="FILE.npy", help="also save the final latents")
    parser.add_argument("--decode-latents", metavar="FILE.npy",
                        help="skip denoising: decode these latents (from --save-latents)")
    parser.add_argument("--resume", metavar="DIR",
                        help="checkpoint every step in DIR and continue an interrupted render from it")
    parser.add_argument("--init-image", metavar="FILE", help="image-to-image: start from this picture (any size: "
                        "scaled to cover --size and centre-cropped; the model needs a vae_encoder)")
    parser.add_argument("--strength", type=float, metavar="S", help="image-to-image: how much of the picture "
                        "to repaint, 0 < S <= 1 (default 0.6; 0.3 stays close, 0.8 keeps only the layout)")
    parser.set_defaults(func=render_command)


class ProgressBar:
    """One updating line on a terminal (a line per step otherwise): step, bar, percent, ETA."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream = stream
        self.width = width
        self.tty = stream.isatty()
        self.last_draw = 0.0
        self.steps_done = self.steps_total = 0  # for the Ctrl-C message

    def __call__(self, progress: Progress) -> None:
        if progress.phase == "unet":
            self.steps_total = progress.steps
            if progress.step_done:
                self.steps_done = progress.step
        self._draw(progress)

    def _draw(self, progress: Progress) -> None:
        now = time.monotonic()
        if progress.phase == "unet" and not progress.step_done and self.tty and now - self.last_draw < 0.2:
            return
        if not self.tty and not (progress.step_done or progress.phase != "unet" and progress.op_fraction == 0):
            return
        self.last_draw = now
        self.stream.write(("\r" if self.tty else "") + self._line(progress) + ("" if self.tty else "\n"))
        self.stream.flush()

    def _line(self, progress: Progress) -> str:
        if progress.phase == "text":
            return "encoding prompt…".ljust(self.width + 40)
        if progress.phase == "vae":
            return f"decoding image {progress.op_fraction:4.0%}".ljust(self.width + 40)
        if progress.phase == "encode":
            return f"encoding init image {progress.op_fraction:4.0%}".ljust(self.width + 40)
        filled = int(progress.fraction * self.width)
        eta = "" if progress.eta_seconds is None else f" ETA {_clock(progress.eta_seconds)}"
        shown = progress.step if progress.step_done else progress.step + 1
        return (f"step {shown}/{progress.steps} [{'#' * filled}{'.' * (self.width - filled)}] "
                f"{progress.fraction:4.0%}{eta}{fetch_text(progress)}").ljust(self.width + 40)

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def fetch_text(progress: Progress) -> str:
    """`` · 3.44 GB/step (3.1 GB cached), link 4.1 MB/s``: weight bytes read in the last step (the part
    from the weight cache) and the HTTP rate, if known."""
    from frame.engine.io.fetch_stats import format_bytes

    parts = []
    if progress.bytes_per_step is not None:
        cached = progress.cache_bytes_per_step
        parts.append(f"{format_bytes(progress.bytes_per_step)}/step"
                     + (f" ({format_bytes(cached)} cached)" if cached else ""))
    if progress.link_rate:
        parts.append(f"link {format_bytes(progress.link_rate)}/s")
    return " · " + ", ".join(parts) if parts else ""


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _load_array(path: str, what: str):
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{what}: cannot read {path}: {exc}") from exc


def check_writable(path: str, option: str) -> None:
    """Refuse a file the render could not write, before the render (``atomicfile.unwritable_reason``)."""
    from frame.atomicfile import unwritable_reason

    reason = unwritable_reason(path)
    if reason:
        raise UsageError(f"{option} {path}: {reason}")


def _out_format(path: str) -> str:
    from frame.diffusion.pngmeta import image_format

    try:
        return image_format(path)
    except ValueError as exc:
        raise UsageError(f"--out {exc}") from None


def _size(pipe, text: str, display_size: str) -> tuple[int, int]:
    from frame.diffusion.sizes import parse_size

    size = parse_size(text)
    if size is not None:
        return size
    panel = parse_size(display_size)
    assert panel is not None
    return pipe.auto_size(panel[0] / panel[1])


def _generate(pipe, args: argparse.Namespace, config, bar: ProgressBar):
    """Denoise and decode as the options say (from --init-image when given); returns the image and its
    A1111 parameters."""
    from frame.diffusion.resume import resumable_seed
    from frame.seeds import resolve_seed

    model = config.model
    width, height = _size(pipe, args.size or model.size, config.display.size)
    try:  # "random" (-1) is decided here, once: with --resume, as the interrupted render decided it
        seed = resumable_seed(args.resume, args.seed) if args.resume else resolve_seed(args.seed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    settings = pipe.settings(args.prompt, model.negative_prompt if args.negative is None else args.negative,
                             model.steps if args.steps is None else args.steps,
                             model.guidance if args.guidance is None else args.guidance,
                             args.sampler or model.sampler, seed, width, height, _strength(args), args.noise)
    print(f"seed {settings.seed}{' (random)' if args.seed == -1 else ''}", file=sys.stderr)
    init = None
    if args.init_image:
        from frame.diffusion.img2img import prepare

        init = prepare(args.init_image, settings.width, settings.height)
    noise = _load_array(args.init_noise, "--init-noise") if args.init_noise else None
    latents = pipe.denoise_settings(settings, noise, bar, args.resume, init_image=init)
    if args.save_latents:
        import numpy as np

        np.save(args.save_latents, latents)
    return pipe.decode(latents, bar), pipe.parameters(settings, init)


def _interrupted(args: argparse.Namespace, bar: ProgressBar) -> Interrupted:
    """What Ctrl-C leaves: with --resume the last finished step is on disk and the same command goes
    on from it; without, nothing is kept and --resume is how to make the next one resumable."""
    bar.finish()
    done = f" after step {bar.steps_done}/{bar.steps_total}" if bar.steps_total else ""
    if args.resume:
        return Interrupted(f"stopped{done}; run the same frame render command again (with --resume "
                           f"{args.resume}) to continue from the last finished step")
    return Interrupted(f"stopped{done}; nothing was kept. Add --resume DIR to frame render to checkpoint "
                       "every step, so that running it again after Ctrl-C continues where it stopped")


def _strength(args: argparse.Namespace) -> float | None:
    if args.init_image is None:
        return None
    from frame.diffusion.img2img import DEFAULT_STRENGTH

    return DEFAULT_STRENGTH if args.strength is None else args.strength


def _check_inputs(args: argparse.Namespace, config) -> None:
    """Refuse a missing model folder or input file before the model loads (exit 2, bad input): the
    init image was once reported only after a model had loaded, and a missing --model exited 1."""
    from pathlib import Path

    from PIL import Image, UnidentifiedImageError

    from frame.models import resolve_model_source

    source = resolve_model_source(args.model or config.model.source)
    if "://" not in source and not Path(source).expanduser().is_dir():
        where = f"--model {args.model}" if args.model else f"model.source {config.model.source}"
        raise UsageError(f"{where}: no such model folder (a diffusers ONNX export or OnnxStream folder, an "
                         "http(s) URL, or 'demo')")
    for option, path in (("--init-noise", args.init_noise), ("--decode-latents", args.decode_latents)):
        if path and not Path(path).is_file():
            raise UsageError(f"{option} {path}: no such file")
    if args.init_image:
        try:
            with Image.open(args.init_image) as image:
                image.size  # noqa: B018 - the header is read: is it a picture at all?
        except FileNotFoundError:
            raise UsageError(f"--init-image {args.init_image}: no such file") from None
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            raise UsageError(f"--init-image {args.init_image}: not a picture Pillow can read ({exc})") from None


def render_command(args: argparse.Namespace) -> int:
    from frame.config import load_config
    from frame.diffusion.configured import engine_weights, load_configured_pipeline
    from frame.diffusion.pngmeta import save_image
    from frame.diffusion.resume import ResumeStore
    from frame.estimate.vae import peak_counter
    from frame.models import resolve_model_source

    config = load_config(args.config)
    if args.prompt is None and args.decode_latents is None:
        raise UsageError("render: --prompt is required (or --decode-latents FILE.npy)")
    if args.strength is not None and args.init_image is None:
        raise UsageError("render: --strength is for image-to-image: give --init-image FILE too")
    _check_inputs(args, config)
    out_format = _out_format(args.out)
    check_writable(args.out, "--out")
    if args.save_latents:
        check_writable(args.save_latents, "--save-latents")
    bar = ProgressBar(sys.stderr)
    try:
        weights = engine_weights(config.model.weights)  # the VAE tiles the estimate counts:
        pipe = load_configured_pipeline(config, args.model and resolve_model_source(args.model),
                                        vae_peak=lambda loaded: peak_counter(loaded, weights, loaded.http))
        if args.decode_latents:
            image, parameters = pipe.decode(_load_array(args.decode_latents, "--decode-latents"), bar), None
        else:
            image, parameters = _generate(pipe, args, config, bar)
    except KeyboardInterrupt:
        raise _interrupted(args, bar) from None
    bar.finish()
    save_image(image, args.out, parameters.to_text() if parameters else None, out_format)
    if args.resume:
        ResumeStore(args.resume, "").clear()
    seed = f", seed {parameters.seed}" if parameters else ""
    print(f"wrote {args.out} ({image.width}x{image.height}{seed})")
    return 0
