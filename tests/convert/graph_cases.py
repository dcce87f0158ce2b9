"""The graph fixtures' shared half (tests and tools/build_graph_fixtures.py): which builder a case's
``kind`` names, and reading a committed case folder (``tests/fixtures/graphs/<case>/``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from frame.convert import graphs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "graphs"


def build_case(kind: str, config: dict[str, Any], options: dict[str, Any]) -> onnx.ModelProto:
    """The structure-only graph of one case (``options``: the builder's keyword arguments)."""
    if kind == "vae_decoder":
        return graphs.build_vae_decoder(graphs.VaeConfig.from_diffusers(config))
    if kind == "vae_encoder":
        return graphs.build_vae_encoder(graphs.VaeConfig.from_diffusers(config), **options)
    if kind == "taesd_decoder":
        return graphs.build_taesd_decoder(graphs.TinyVaeConfig.from_diffusers(config))
    if kind == "taesd_encoder":
        return graphs.build_taesd_encoder(graphs.TinyVaeConfig.from_diffusers(config))
    if kind == "text_encoder":
        return graphs.build_text_encoder(graphs.TextEncoderConfig.from_transformers(config, **options))
    if kind == "unet":
        return graphs.build_unet(graphs.UNetConfig.from_diffusers(config))
    raise ValueError(f"unknown case kind {kind!r}")


def _npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _float32(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The committed float16 weights as the float32 state dict they are (torch ran on these values)."""
    return {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in arrays.items()}


@dataclass(frozen=True)
class GraphCase:
    name: str
    kind: str
    config: dict[str, Any]
    options: dict[str, Any]
    weights: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray]  # graph feeds, plus "noise" for a sampling encoder
    expected: dict[str, np.ndarray]

    def model(self) -> onnx.ModelProto:
        return graphs.attach_weights(build_case(self.kind, self.config, self.options), self.weights)

    def feeds(self) -> dict[str, np.ndarray]:
        return {k: v for k, v in self.inputs.items() if k != "noise"}


def load_case(folder: Path) -> GraphCase:
    meta = json.loads((folder / "case.json").read_text())
    weights = folder.parent / meta["weights_from"] if meta.get("weights_from") else folder
    return GraphCase(folder.name, meta["kind"], meta["config"], meta.get("options", {}),
                     _float32(_npz(weights / "weights.npz")), _npz(folder / "inputs.npz"),
                     _npz(folder / "expected.npz"))


def case_folders() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*") if (p / "case.json").is_file()) if FIXTURES.is_dir() else []


def rel_l2(got: np.ndarray, want: np.ndarray) -> float:
    got, want = got.astype(np.float64), want.astype(np.float64)
    return float(np.linalg.norm(got - want) / max(float(np.linalg.norm(want)), 1e-12))
