"""Build the engine's whole-model fixtures: tiny random-weight SD components exported to ONNX.

Dev-only (torch, diffusers, transformers, onnxruntime). Each fixture folder holds ``model.onnx``
(+ ``model.onnx_data`` for external-data variants), ``inputs.npz`` (seeded feeds keyed by ONNX input
name), ``expected.npz`` (onnxruntime's outputs keyed by ONNX output name) and ``meta.json``.

    /work/venv/bin/python tools/build_engine_fixtures.py [--out tests/fixtures/engine] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_components as ec  # noqa: E402
import onnx_export as ox  # noqa: E402

log = logging.getLogger("build_engine_fixtures")
REPO = Path(__file__).resolve().parents[1]
SEED = 1234


@dataclass(frozen=True)
class Variant:
    """One exported fixture: which component, which exporter/opset, and how it is stored."""

    name: str
    arch: str  # unet_sd15 | unet_sdxl | vae_decoder | clip_text | clip_text_with_projection
    exporter: str  # torchscript | dynamo
    opset: int
    dynamic: bool
    external: bool = False
    fp16: str = "none"  # none | weights (Optimum fp16 initializers + Cast) | full (model.half())
    timestep: str = "float32_1d"  # float32_1d | int64_1d | float32_scalar (UNet only)
    ids_dtype: str = "int32"  # CLIP input_ids dtype: optimum casts to int32
    hidden_states: bool = False  # CLIP: also output hidden_states.0..N
    notes: str = ""


VARIANTS = [
    Variant("unet_sd15_ts14_dynamic", "unet_sd15", "torchscript", 14, True,
            notes="optimum 1.x convention: float32 timestep of shape [steps]; fed with shape [1]"),
    Variant("unet_sd15_ts17_static_external", "unet_sd15", "torchscript", 17, False, external=True,
            timestep="int64_1d", notes="static shapes, int64 timestep, weights in model.onnx_data"),
    Variant("unet_sd15_dynamo18_dynamic", "unet_sd15", "dynamo", 18, True, timestep="float32_scalar",
            notes="current optimum-onnx convention: 0-d float32 timestep"),
    Variant("unet_sd15_ts14_fp16w_dynamic", "unet_sd15", "torchscript", 14, True, fp16="weights",
            notes="Optimum-style fp16 weights: float16 initializers feeding Cast(to=FLOAT)"),
    Variant("unet_sdxl_ts17_dynamic", "unet_sdxl", "torchscript", 17, True,
            notes="text_time conditioning: text_embeds + time_ids; timestep fed with shape [batch]"),
    Variant("unet_sdxl_dynamo18_dynamic_external", "unet_sdxl", "dynamo", 18, True, external=True,
            timestep="float32_scalar"),
    Variant("vae_decoder_ts14_dynamic", "vae_decoder", "torchscript", 14, True),
    Variant("vae_decoder_ts17_static_fp16w", "vae_decoder", "torchscript", 17, False, fp16="weights"),
    Variant("vae_decoder_dynamo18_dynamic", "vae_decoder", "dynamo", 18, True),
    Variant("vae_decoder_ts17_fp16_static", "vae_decoder", "torchscript", 17, False, fp16="full",
            notes="model.half() export: float16 inputs, weights and outputs"),
    Variant("clip_text_ts14_dynamic", "clip_text", "torchscript", 14, True),
    Variant("clip_text_ts17_static_int64", "clip_text", "torchscript", 17, False, ids_dtype="int64"),
    Variant("clip_text_dynamo18_dynamic", "clip_text", "dynamo", 18, True),
    Variant("clip_text_ts17_fp16w_hidden", "clip_text", "torchscript", 17, True, fp16="weights",
            hidden_states=True, notes="SDXL text_encoder style: output_hidden_states=True"),
    Variant("clip_text_proj_ts17_dynamic_hidden", "clip_text_with_projection", "torchscript", 17, True,
            hidden_states=True, notes="SDXL text_encoder_2 style"),
    Variant("clip_text_proj_dynamo18_dynamic_hidden", "clip_text_with_projection", "dynamo", 18, True,
            hidden_states=True),
    Variant("clip_text_ts17_fp16_static", "clip_text", "torchscript", 17, False, fp16="full",
            notes="model.half() export: float16 outputs (input_ids stay int32)"),
]

# Shapes fed to the exported model. Dynamic models get shapes that differ from the traced ones.
FEED_SHAPES = {
    "unet": {"dynamic": {"batch": 2, "height": 16, "width": 8, "seq": 77}, "static": dict(ec.TRACE)},
    "vae_decoder": {"dynamic": {"batch": 1, "height": 6, "width": 10}, "static": {"batch": 1, "height": 8,
                                                                                  "width": 8}},
    "clip": {"dynamic": {"batch": 3, "seq": 77}, "static": {"batch": 1, "seq": 77}},
}


def _component(v: Variant) -> ec.Component:
    if v.arch.startswith("unet"):
        return ec.unet_component(SEED, sdxl=v.arch == "unet_sdxl", timestep=v.timestep)
    if v.arch == "vae_decoder":
        return ec.vae_decoder_component(SEED)
    return ec.clip_component(SEED, v.arch == "clip_text_with_projection", v.hidden_states, v.ids_dtype)


def _shapes(v: Variant) -> tuple[dict, dict]:
    """(trace shape, feed shape) for a variant."""
    family = "unet" if v.arch.startswith("unet") else "clip" if v.arch.startswith("clip") else "vae_decoder"
    if v.dynamic:
        trace = dict(ec.TRACE)
        if family == "vae_decoder":
            trace.update(height=4, width=6)
        feed = dict(FEED_SHAPES[family]["dynamic"])
        if v.name == "unet_sd15_ts14_dynamic":
            feed["steps"] = 1
        return trace, feed
    static = dict(FEED_SHAPES[family]["static"])
    if family == "unet":
        static.update(batch=1, steps=1)
    return static, static


def _size_threshold(v: Variant) -> int:
    """Bytes from which tensors go external (see ``onnx_export.save``)."""
    return 1024 if v.exporter == "dynamo" else 0


def _cast_feeds(feeds: dict[str, np.ndarray], fp16_full: bool) -> dict[str, np.ndarray]:
    if not fp16_full:
        return feeds
    return {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in feeds.items()}


def build_variant(v: Variant, out_root: Path) -> dict:
    """Export, save, verify and record one fixture; returns its meta dict."""
    comp = _component(v)
    name_seed = zlib.crc32(v.name.encode())
    trace_shape, feed_shape = _shapes(v)
    trace = _cast_feeds(comp.make_inputs(np.random.default_rng(SEED), trace_shape), v.fp16 == "full")
    feeds = _cast_feeds(comp.make_inputs(np.random.default_rng(name_seed), feed_shape), v.fp16 == "full")
    module = comp.module
    fp32_feeds = {k: a.astype(np.float32) if a.dtype == np.float16 else a for k, a in feeds.items()}
    reference = ox.run_torch(module, fp32_feeds, comp.output_names)
    if v.fp16 == "weights":
        ox.round_weights_to_fp16(module)
    if v.fp16 == "full":
        module = module.half()
    args = tuple(torch.from_numpy(np.array(a, copy=True)) for a in trace.values())
    axes = comp.dynamic_axes if v.dynamic else None
    export = ox.export_dynamo if v.exporter == "dynamo" else ox.export_torchscript
    model = export(module, args, comp.input_names, comp.output_names, v.opset, axes)
    if v.fp16 == "weights":
        model = ox.to_fp16_weights(model)
    folder = out_root / v.name
    files = ox.save(model, folder, v.external, _size_threshold(v))
    got = ox.run_ort(folder / "model.onnx", feeds)
    np.savez(folder / "inputs.npz", **feeds)
    np.savez(folder / "expected.npz", **got)
    meta = _meta(v, comp, model, got, reference, trace_shape, feed_shape)
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    files += [folder / "inputs.npz", folder / "expected.npz", folder / "meta.json"]
    size = sum(f.stat().st_size for f in files)
    worst = max(e["rel_l2"] for e in meta["ort_vs_torch_fp32"].values())
    print(f"wrote {folder.relative_to(REPO) if folder.is_relative_to(REPO) else folder}: "
          f"{len(files)} files, {size / 1024:.0f} KiB, ops={len(meta['op_types'])}, "
          f"ORT vs torch fp32 worst rel L2 {worst:.2e}")
    return meta


def _meta(v, comp, model, got, reference, trace_shape, feed_shape) -> dict:
    return {
        "name": v.name,
        "architecture": comp.arch,
        "exporter": v.exporter,
        "opset": v.opset,
        "dynamic": v.dynamic,
        "dynamic_axes": {k: {str(a): n for a, n in d.items()} for k, d in comp.dynamic_axes.items()}
        if v.dynamic else {},
        "weights": "embedded" if not v.external else
        f"external: {ox.EXTERNAL_DATA_NAME}, tensors >= {_size_threshold(v)} bytes",
        "fp16": v.fp16,
        "timestep": v.timestep if comp.arch.startswith("unet") else None,
        **ox.io_signature(model),
        "op_types": ox.op_types(model),
        "trace_shape": trace_shape,
        "feed_shape": feed_shape,
        "seed": SEED,
        "config": comp.config,
        "ort_vs_torch_fp32": ox.max_errors(
            {k: a.astype(np.float32) for k, a in got.items()}, reference
        ),
        "torch_version": torch.__version__,
        "notes": v.notes,
        "variant": asdict(v),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "engine",
                        help="output folder (default: tests/fixtures/engine)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="build only this fixture (repeatable); default: all")
    parser.add_argument("--list", action="store_true", help="list fixture names and exit")
    args = parser.parse_args(argv)
    if args.list:
        for v in VARIANTS:
            print(v.name)
        return 0
    unknown = set(args.only) - {v.name for v in VARIANTS}
    if unknown:
        parser.error(f"unknown fixture(s): {', '.join(sorted(unknown))}")
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    for v in VARIANTS:
        if not args.only or v.name in args.only:
            build_variant(v, args.out)
    total = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    print(f"total size of {args.out}: {total / 1024 / 1024:.2f} MiB")
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main())
