"""Which engine runs the served pipeline: onnxruntime (``pip install 'frame[desktop]'``) or frame's own.

On a desktop the memory that frame's streaming engine saves does not matter and onnxruntime's kernels
are faster, so "auto" takes onnxruntime when it is installed and the model is a local diffusers ONNX
export; frame's engine otherwise (OnnxStream folders, http(s) sources, no onnxruntime). Frame's engine
gives exactly the picture a frame paints on its own; onnxruntime's differs in the last bits.

img2img's VAE encoder loads through the same loader. An encoder exported with ``latent_dist.sample()``
traced (optimum < 1.23, diffusers' conversion script, the demo model) draws its posterior noise with
a RandomNormalLike node; onnxruntime would draw it from its own generator, which the request's seed
does not reach, so the picture would not be the one the frame paints with that seed (PSNR 20.5 dB from
it on the demo model, against > 40 dB with the seeded draw). Such a graph (the encoder runs once per picture, before the
UNet's steps) is loaded on frame's engine, which hands that op frame's seeded draw
(``vae.encoder``); an encoder with ``latent_parameters`` output (optimum >= 1.23) runs on onnxruntime.

``OrtModel`` wraps an ``InferenceSession`` in the pipeline's ``frame.engine.runnable.Runnable``, as
frame's ``Model`` is one: ``inputs``/``outputs`` (``TensorInfo``), ``run(feeds, progress)``,
``override_input_shape`` and ``close`` do the work; what only frame's streaming engine has (weights
read per run, read-ahead, fetch counts, token-row overrides, shared weight reads) is answered plainly:
nothing streamed, no read-ahead, not counted, no table, separate runs.
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import os
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from frame.diffusion.configured import pipeline_setup
from frame.diffusion.vae.encoder import RANDOM_OPS
from frame.engine.model import TensorInfo
from frame.engine.runnable import Runnable
from frame.errors import UsageError

if TYPE_CHECKING:
    from frame.config.schema import Config
    from frame.diffusion.pipeline import Pipeline
    from frame.engine.io.weights import WeightRef
    from frame.engine.lora.matching import MatchReport

log = logging.getLogger(__name__)
ENGINES = ("auto", "frame", "onnxruntime")
_ORT_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
              "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
              "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}
ORT_VAE_TILE = 128  # latent pixels
_SKIPPED_PROVIDERS = {"TensorrtExecutionProvider"}  # needs TensorRT libraries and long engine builds


def onnxruntime_installed() -> bool:
    return importlib.util.find_spec("onnxruntime") is not None


class OrtModel:
    """An onnxruntime session as the diffusion pipeline's ``Runnable`` (``frame.engine.runnable``)."""

    shares_weight_reads = False  # the session holds every weight: run_shared is separate runs

    def __init__(self, path: str) -> None:
        import onnxruntime as ort

        providers = [p for p in ort.get_available_providers() if p not in _SKIPPED_PROVIDERS]
        self.session = ort.InferenceSession(path, providers=providers)
        self.inputs = [_info(i) for i in self.session.get_inputs()]
        self.outputs = [_info(o) for o in self.session.get_outputs()]
        self.op_counts: Counter[str] = Counter()  # not read: a random op's encoder loads on frame's engine
        self.streamed_weights: list[WeightRef] = []  # onnxruntime holds them all
        self.lora_report: MatchReport | None = None  # LoRAs are frame's engine's (they stream with the weights)

    @property
    def fetch_stats(self) -> None:
        """onnxruntime does not count the bytes it reads."""
        return None

    def run(self, feeds: Mapping[str, np.ndarray], progress: Callable[[float], None] | None = None,
            rng: object | None = None, overrides: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None
            ) -> dict[str, np.ndarray]:
        if rng is not None or overrides:
            raise UsageError("onnxruntime takes neither a random source nor tensor overrides: use --engine frame")
        declared = {i.name: i.dtype for i in self.inputs}
        arrays = {name: np.asarray(value).astype(declared.get(name) or np.asarray(value).dtype, copy=False)
                  for name, value in feeds.items()}
        results = self.session.run(None, arrays)
        if progress is not None:
            progress(1.0)  # onnxruntime reports nothing in between
        return {o.name: value for o, value in zip(self.outputs, results)}

    def run_shared(self, feeds: list[Mapping[str, np.ndarray]], progress: Callable[[float], None] | None = None
                   ) -> list[dict[str, np.ndarray]]:
        return [self.run(one, progress) for one in feeds]

    def token_table(self, input_name: str = "input_ids") -> None:
        """No table: the session's intermediate tensors cannot be replaced (textual inversion)."""
        return None

    def set_readahead(self, budget_bytes: int) -> bool:
        return False  # nothing is read ahead: the session loaded every weight

    def override_input_shape(self, name: str, shape: tuple[int | str | None, ...]) -> None:
        for index, info in enumerate(self.inputs):
            if info.name == name:
                self.inputs[index] = TensorInfo(name, info.dtype, tuple(shape))
                return
        raise UsageError(f"the model has no input {name!r}")

    def close(self) -> None:
        self.session = None
        gc.collect()


def _info(node: Any) -> TensorInfo:
    dtype = _ORT_TYPES.get(node.type)
    shape = tuple(d if isinstance(d, (int, str)) else None for d in node.shape) if node.shape is not None else None
    return TensorInfo(node.name, np.dtype(dtype) if dtype is not None else None, shape)


def ort_loader(source: Any, dynamic_shapes: bool = False) -> OrtModel:
    """``dynamic_shapes`` is not applied: a static VAE decoder then decodes in tiles of its own fixed
    size (``vae.decoder.decode``), which a desktop's memory holds; frame's engine loader rewrites it."""
    if not isinstance(source, (str, os.PathLike)) or "://" in str(source) or not os.path.isfile(source):
        raise UsageError(f"onnxruntime runs local .onnx files only, not {source!r}: use --engine frame")
    return OrtModel(str(source))


def draws_noise(path: str) -> bool:
    """True when the graph at ``path`` has a random op (weights are not read: external data stays out)."""

    graph = onnx.load(path, load_external_data=False).graph
    return any(node.op_type in RANDOM_OPS for node in graph.node)


def ort_loader_with_seeded_encoder(frame_loader: Callable[[str], Runnable]) -> Callable[..., Runnable]:
    """``ort_loader``, except a VAE encoder that draws its own noise loads on ``frame_loader`` (module doc)."""

    def load(source: Any, dynamic_shapes: bool = False) -> Runnable:
        path = str(source)
        if os.path.basename(os.path.dirname(path)) == "vae_encoder" and os.path.isfile(path) and draws_noise(path):
            log.info("vae_encoder draws its own posterior noise: running it on frame's engine (seeded)")
            return frame_loader(path)
        return ort_loader(source, dynamic_shapes)

    return load


def choose_engine(engine: str, source: str) -> str:
    """"frame" or "onnxruntime" for ``--engine`` ``engine`` and the model ``source``."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")
    local_export = "://" not in source and os.path.isfile(os.path.join(os.path.expanduser(source),
                                                                       "model_index.json"))
    if engine == "onnxruntime":
        if not onnxruntime_installed():
            raise UsageError("onnxruntime is not installed: pip install 'frame[desktop]' (or use --engine frame)")
        if not local_export:
            raise UsageError(f"onnxruntime needs a local diffusers ONNX export folder, not {source}")
        return "onnxruntime"
    if engine == "auto" and onnxruntime_installed() and local_export:
        return "onnxruntime"
    return "frame"


def load_served_pipeline(source: str, engine: str, config: Config) -> tuple[Pipeline, str]:
    """The pipeline for ``source`` on the chosen engine, and that engine's name. It is the configured
    pipeline (``frame.diffusion.configured``: the token, timeouts and weight cache of ``config.model``
    for a URL source, the weights provider); outside the render worker's memory cap."""

    chosen = choose_engine(engine, source)
    setup = pipeline_setup(config, source, capped=False)
    frame_loader = setup.loader()
    loader = ort_loader_with_seeded_encoder(frame_loader) if chosen == "onnxruntime" else frame_loader
    # onnxruntime on a desktop has the memory to decode up to 1024 px in one piece (faster, no seams)
    vae_tile = max(setup.vae_tile or 0, ORT_VAE_TILE) if chosen == "onnxruntime" else setup.vae_tile
    return setup.load(loader, vae_tile), chosen
