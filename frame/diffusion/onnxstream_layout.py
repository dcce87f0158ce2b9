"""OnnxStream's published Stable Diffusion folders as a ``model.source`` (local folder or http(s) URL).

The layouts are the ones OnnxStream's sd app reads (and its ``--download`` fetches from Hugging Face):

* SD 1.5: ``tokenizer/{vocab.txt,merges.txt}``, ``text_encoder_fp32/``, ``unet_fp16/``,
  ``vae_decoder_fp16/`` or ``vae_decoder_qu8/`` (uint8 weights + ``range_data.txt``: W8A8);
* SDXL: ``sdxl_tokenizer/``, ``sdxl_text_encoder_1_fp32/``, ``sdxl_text_encoder_2_fp32/``,
  ``sdxl_unet_fp16/`` or ``sdxl_unet_anyshape_fp16/`` (Turbo, any size), and
  ``sdxl_vae_decoder_32x32_fp16/`` (a decoder for 32×32-latent tiles: OnnxStream decodes SDXL in
  tiles of 32 stepping by 24, and so does frame with it) or ``sdxl_vae_decoder_fp16/`` /
  ``sdxl_vae_decoder_anyshape_fp16/`` (whole image, or tiles at frame's tile size).

Each component folder holds a ``model.txt`` read by ``frame.engine.onnxstream``. The published graphs
name their inputs and outputs as their exporter did (SD 1.5's text encoder reads ``onnx::Reshape_0``,
SDXL's encoders return ``out_0``, ``out_13``, ...; the SD app asks for the penultimate hidden state by
name). This module maps them to the names the rest of the pipeline uses (``input_ids``,
``last_hidden_state``, ``hidden_states.N``, ``text_embeds``, ``latent_sample``, ``sample``,
``out_sample``), so tokenisation, guidance, sampling and decoding are the code the diffusers layout
runs. There is no scheduler file: the schedules are those of the models' own releases.

``open_model_files`` decides between this layout and a diffusers export (``model_index.json``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

from frame.atomicfile import write_bytes_atomic
from frame.diffusion.conditioning import Encoder
from frame.diffusion.model_files import ModelFiles, ModelLocation
from frame.diffusion.model_info import DEFAULT_SAMPLE_SIZE, DEFAULT_SCALING, SD15, SDXL, ModelInfo, read_model_info
from frame.engine.io.http_settings import HttpSettings
from frame.engine.onnxstream import OnnxStreamSource
from frame.engine.onnxstream.summary import ModelSummary, read_summary
from frame.errors import FrameError
from frame.redact import redact_url

log = logging.getLogger(__name__)

_SCALED_LINEAR = {"beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear",
                  "num_train_timesteps": 1000, "steps_offset": 1, "clip_sample": False, "set_alpha_to_one": False,
                  "prediction_type": "epsilon", "trained_betas": None}
# The scheduler_config.json of SD 1.5, SDXL base 1.0 and SDXL Turbo as diffusers loads them (with the
# class defaults it fills in, e.g. PNDM's "leading" spacing).
SCHEDULERS = {
    "sd15": {"_class_name": "PNDMScheduler", **_SCALED_LINEAR, "skip_prk_steps": True, "timestep_spacing": "leading"},
    "sdxl": {"_class_name": "EulerDiscreteScheduler", **_SCALED_LINEAR, "interpolation_type": "linear",
             "timestep_spacing": "leading", "use_karras_sigmas": False, "skip_prk_steps": True,
             "sample_max_value": 1.0},
    "sdxl_turbo": {"_class_name": "EulerAncestralDiscreteScheduler", **_SCALED_LINEAR, "interpolation_type": "linear",
                   "timestep_spacing": "trailing", "use_karras_sigmas": False, "skip_prk_steps": True,
                   "sample_max_value": 1.0},
}
_OUT = re.compile(r"^out_(\d+)$")
_HIDDEN = re.compile(r"^hidden_states\.(\d+)$")


@dataclass(frozen=True)
class Layout:
    """One published layout: folder names, each list in order of preference."""

    kind: str
    tokenizer: str
    encoders: tuple[str, ...]
    unets: tuple[str, ...]
    vae_tiles: tuple[str, ...]
    vaes: tuple[str, ...]


LAYOUTS = (
    Layout(SDXL, "sdxl_tokenizer", ("sdxl_text_encoder_1_fp32", "sdxl_text_encoder_2_fp32"),
           ("sdxl_unet_fp16", "sdxl_unet_anyshape_fp16"), ("sdxl_vae_decoder_32x32_fp16",),
           ("sdxl_vae_decoder_fp16", "sdxl_vae_decoder_anyshape_fp16")),
    Layout(SD15, "tokenizer", ("text_encoder_fp32",), ("unet_fp16",), (), ("vae_decoder_fp16", "vae_decoder_qu8")),
)
TOKENIZER_FILES = ("vocab.txt", "merges.txt")


def is_onnxstream_folder(source: str | os.PathLike) -> bool:
    """A local folder with an OnnxStream tokenizer and at least one component model.txt."""
    root = Path(source).expanduser()
    return any((root / layout.tokenizer / "vocab.txt").is_file()
               and any((root / c / "model.txt").is_file() for c in (*layout.unets, *layout.encoders))
               for layout in LAYOUTS)


class OnnxStreamFiles(ModelLocation):
    """Access to one OnnxStream layout, with the interface the pipeline uses for a diffusers export."""

    def __init__(self, source: str | os.PathLike, cache_dir: str | os.PathLike | None = None,
                 http: HttpSettings | None = None) -> None:
        super().__init__(source, cache_dir)
        self.http = http or HttpSettings()
        self._present: dict[str, bool] = {}
        self.layout = next((lay for lay in LAYOUTS if self.exists(f"{lay.tokenizer}/vocab.txt")), None)
        if self.layout is None:
            raise FrameError(f"{redact_url(self.source)} is neither a diffusers ONNX export (no model_index.json) "
                             "nor an OnnxStream model folder (no tokenizer/vocab.txt or sdxl_tokenizer/vocab.txt)")
        self.encoder_folders = [self._required(name, (name,)) for name in self.layout.encoders]
        self.unet = self._required("UNet", self.layout.unets)
        self.vae_tiles = self._first(self.layout.vae_tiles)
        self.vae = self._first(self.layout.vaes)
        if self.vae is None and self.vae_tiles is None:
            raise FrameError(f"{redact_url(self.source)}: no VAE decoder folder ({', '.join(self.layout.vaes)})")
        self._summaries: dict[str, ModelSummary] = {}

    # -- files ------------------------------------------------------------------------------------
    def exists(self, relative: str) -> bool:
        if relative not in self._present:
            if not self.is_url:
                self._present[relative] = (self.root / relative).is_file()
            else:
                try:
                    self._fetch(relative)
                    self._present[relative] = True
                except FileNotFoundError:
                    self._present[relative] = False
        return self._present[relative]

    def _first(self, folders: tuple[str, ...]) -> str | None:
        return next((f for f in folders if self.exists(f"{f}/model.txt")), None)

    def _required(self, what: str, folders: tuple[str, ...]) -> str:
        found = self._first(folders)
        if found is None:
            raise FrameError(f"{redact_url(self.source)}: OnnxStream {self.layout.kind} folder without {what} "
                             f"({' or '.join(f + '/model.txt' for f in folders)})")
        return found

    def _local(self, relative: str) -> Path:
        return self.root / relative if not self.is_url else self._fetch(relative)

    def _fetch(self, relative: str) -> Path:
        """Download a small file (tokenizer, model.txt, range_data.txt) into the cache once, with the
        layout's ``HttpSettings`` (token, retries while the server is unreachable)."""
        target = self.cache / relative
        if target.is_file():
            return target
        from frame.engine.io.small_files import fetch_small

        content = fetch_small(urljoin(self.base, relative), self.http, self.describe(relative))
        if content is None:
            raise FileNotFoundError(self.describe(relative))
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, content)
        return target

    def describe(self, relative: str) -> str:
        return redact_url(urljoin(self.base, relative)) if self.is_url else str(self.root / relative)

    def local_folder(self, folder: str, names: tuple[str, ...] = TOKENIZER_FILES) -> Path:
        for name in TOKENIZER_FILES:
            if name == "merges.txt" and not self.exists(f"{folder}/{name}"):
                raise FrameError(f"{self.describe(folder + '/merges.txt')} is missing: without the merges the "
                                 "prompt would be split into single characters (download it with the vocab)")
            self._local(f"{folder}/{name}")
        return self._local(f"{folder}/vocab.txt").parent

    def summary(self, component: str) -> ModelSummary:
        if component not in self._summaries:
            self._summaries[component] = read_summary(str(self._local(f"{component}/model.txt")), self.http)
        return self._summaries[component]

    def source_for(self, component: str, rename: dict[str, str] | None = None,
                   extra_outputs: tuple[str, ...] = ()) -> OnnxStreamSource:
        """What ``load_model`` takes for one component folder (model.txt cached locally for URLs)."""
        renames = tuple(sorted((rename or {}).items()))
        if not self.is_url:
            return OnnxStreamSource(str(self.root / component), renames, extra_outputs)
        if self.exists(f"{component}/range_data.txt"):
            self._fetch(f"{component}/range_data.txt")
        return OnnxStreamSource(str(self._fetch(f"{component}/model.txt")), renames, extra_outputs,
                                weights_folder=urljoin(self.base, component + "/"))

    def identity(self) -> str:
        parts = [self.source, *self.encoder_folders, self.unet, str(self.vae), str(self.vae_tiles)]
        for component in (self.unet, *self.encoder_folders):
            parts.append(str(self._local(f"{component}/model.txt").stat().st_size))
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    # -- components as the pipeline uses them ------------------------------------------------------
    def encoders(self) -> list[Encoder]:
        tokenizer = self.local_folder(self.layout.tokenizer)
        if self.layout.kind == SD15:
            return [Encoder("text_encoder", tokenizer, self._encoder_source(self.encoder_folders[0], False))]
        first, second = self.encoder_folders
        return [Encoder("text_encoder", tokenizer, self._encoder_source(first, False)),
                Encoder("text_encoder_2", tokenizer, self._encoder_source(second, True), pad_token="!")]

    def _encoder_source(self, component: str, projected: bool) -> OnnxStreamSource:
        summary = self.summary(component)
        rename = {_single(summary.inputs, component, "input"): "input_ids"}
        outputs = dict(summary.outputs)
        extra: tuple[str, ...] = ()
        numbered = sorted(int(m.group(1)) for v in summary.values if (m := _OUT.match(v)))
        hidden = sorted(int(m.group(1)) for v in summary.values if (m := _HIDDEN.match(v)))
        if self.layout.kind == SD15:
            rank3 = [name for name, dims in outputs.items() if len(dims) == 3]
            if "last_hidden_state" in summary.values and "last_hidden_state" not in outputs:
                extra = ("last_hidden_state",)
            elif len(rank3) == 1:
                rename[rank3[0]] = "last_hidden_state"
            elif "last_hidden_state" not in outputs:
                raise FrameError(f"{component}: cannot tell the hidden-state output (outputs: {', '.join(outputs)})")
            rank2 = [name for name, dims in outputs.items() if len(dims) == 2]
            if len(rank2) == 1:
                rename[rank2[0]] = "pooler_output"
        elif len(hidden) >= 2:
            extra = (f"hidden_states.{hidden[-2]}", f"hidden_states.{hidden[-1]}")
        elif numbered and numbered[-1] >= 3:
            # exported outputs out_0, out_1, out_2 + k = hidden_states.k: ask for the last two layers
            last = numbered[-1]
            extra = (f"hidden_states.{last - 3}", f"hidden_states.{last - 2}")
            rename.update({f"out_{last - 1}": extra[0], f"out_{last}": extra[1]})
            if projected:
                rename["out_0"] = "text_embeds"
        else:
            raise FrameError(f"{component}: no hidden_states.N or out_N values; SDXL needs the penultimate layer")
        return self.source_for(component, rename, extra)

    def onnx(self, component: str) -> OnnxStreamSource:
        """The diffusers component name → this layout's folder (``unet``; ``vae_decoder`` = the whole-image
        decoder if there is one)."""
        if component == "unet":
            summary = self.summary(self.unet)
            return self.source_for(self.unet, {_single(summary.outputs, self.unet, "output"): "out_sample"})
        if component == "vae_decoder":
            return self._vae_source(self.vae or self.vae_tiles)
        raise FrameError(f"no {component} in an OnnxStream {self.layout.kind} folder")

    def _vae_source(self, component: str) -> OnnxStreamSource:
        summary = self.summary(component)
        return self.source_for(component, {_single(summary.inputs, component, "input"): "latent_sample",
                                           _single(summary.outputs, component, "output"): "sample"})

    def vae_for(self, height: int, width: int, tiled: bool | None) -> OnnxStreamSource:
        """The tile decoder when the latent is larger than its tile (as OnnxStream's SDXL decode), or
        when there is no whole-image decoder; else the whole-image decoder."""
        if self.vae_tiles is not None and tiled is not False:
            tile = _static_hw(self.summary(self.vae_tiles).inputs)
            fits = tile is None or (height >= tile[0] and width >= tile[1])
            if self.vae is None or (fits and (tile is None or height > tile[0] or width > tile[1] or tiled)):
                return self._vae_source(self.vae_tiles)
        return self._vae_source(self.vae or self.vae_tiles)  # type: ignore[arg-type]

    def model_info(self) -> ModelInfo:
        kind = self.layout.kind
        name = redact_url(self.source).rstrip("/").rsplit("/", 1)[-1]  # logged and in metadata
        turbo = kind == SDXL and ("turbo" in name.lower() or self.unet == "sdxl_unet_anyshape_fp16")
        unet = self.summary(self.unet)
        sample = dict(unet.inputs).get("sample", ())
        static = _static_hw((("sample", sample),)) if sample else None
        native = static or (DEFAULT_SAMPLE_SIZE[kind],) * 2
        scheduler = dict(SCHEDULERS["sdxl_turbo" if turbo else kind])
        info = ModelInfo(kind=kind, turbo=turbo, name=name, scheduler_config=scheduler, native_latent=native,
                         vae_factor=8, latent_multiple=2 ** unet.downsamplings,
                         scaling_factor=DEFAULT_SCALING[kind], force_zeros_for_empty_prompt=kind == SDXL)
        log.info("OnnxStream folder %s: %s (UNet %s, VAE %s)", redact_url(self.source), info.label, self.unet,
                 self.vae_tiles or self.vae)
        return info

    def summary_lines(self) -> list[str]:
        """What the folder is, for ``frame config check``."""
        info = self.model_info()
        lines = [f"OnnxStream {info.label} folder ({info.name})"]
        used = {*self.encoder_folders, self.unet, self.vae_tiles, self.vae}
        layout = self.layout
        for component in (*layout.encoders, *layout.unets, *layout.vae_tiles, *layout.vaes):
            if not self.exists(f"{component}/model.txt"):
                continue
            summary = self.summary(component)
            precision = summary.precision
            note = ""
            if precision == "uint8":
                w8a8 = self.exists(f"{component}/range_data.txt")
                note = " + range_data.txt: W8A8" if w8a8 else ", float activations"
            dims = next((d for _, d in summary.inputs if len(d) == 4), ())
            shape = "any size" if dims and 0 in dims[2:] else ("x".join(map(str, dims[2:])) + " latent" if dims else "")
            lines.append(f"{component}: {precision} weights{note}, {summary.weight_bytes / 1e6:.1f} MB"
                         + (f", {shape}" if shape else "") + ("" if component in used else " (present, not used)"))
        return lines


def _single(values: tuple[tuple[str, tuple[int, ...]], ...], component: str, what: str) -> str:
    if len(values) != 1:
        names = ", ".join(name for name, _ in values) or "none"
        raise FrameError(f"{component}: expected one graph {what}, found {names}")
    return values[0][0]


def _static_hw(values: tuple[tuple[str, tuple[int, ...]], ...]) -> tuple[int, int] | None:
    dims = next((d for _, d in values if len(d) == 4), None)
    if dims is None or dims[2] <= 0 or dims[3] <= 0:
        return None
    return dims[2], dims[3]


def open_model_files(source: str | os.PathLike, cache_dir: str | os.PathLike | None = None,
                     http: HttpSettings | None = None) -> tuple[ModelFiles | OnnxStreamFiles, ModelInfo]:
    """The export's files and facts: a diffusers layout (model_index.json) or OnnxStream's published one."""
    text = str(source)
    if not text.startswith(("http://", "https://")) and is_onnxstream_folder(text):
        files: ModelFiles | OnnxStreamFiles = OnnxStreamFiles(text, cache_dir, http)
    else:
        try:
            files = ModelFiles(source, cache_dir, http)
        except FrameError as exc:
            if not text.startswith(("http://", "https://")) or "model_index.json is missing" not in str(exc):
                raise
            files = OnnxStreamFiles(text, cache_dir, http)
    info = files.model_info() if isinstance(files, OnnxStreamFiles) else read_model_info(files)
    return files, info
