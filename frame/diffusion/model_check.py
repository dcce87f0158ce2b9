"""What ``frame config check`` says about the model folder: each component's weight precision,
whether its VAE decoder can be decoded in tiles, and whether image-to-image can run (a vae_encoder).

Precision is read from the graph (no weight bytes are read): 8-bit initializers that feed a
``DequantizeLinear`` (``frame model convert --weights uint8``, onnxruntime QDQ) or ``MatMulInteger``/
``ConvInteger`` (onnxruntime dynamic quantization), float16 and float32 initializers are summed by
bytes. Any 8-bit weights make it "uint8" (a converted model keeps lookup tables in float16 and small
tensors in float32), otherwise the larger of float16 and float32 names it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from frame.diffusion.vae.tiles import DEFAULT_TILE

COMPONENTS = ("text_encoder", "text_encoder_2", "unet", "vae_decoder", "vae_encoder")
INTEGER_CONSUMERS = ("DequantizeLinear", "MatMulInteger", "ConvInteger", "DynamicQuantizeMatMul")


@dataclass(frozen=True)
class Precision:
    label: str          # "fp32", "fp16", "uint8"
    bytes_by_kind: dict[str, int]

    def describe(self) -> str:
        total = sum(self.bytes_by_kind.values()) or 1
        size = f"{total / 1e6:.0f} MB" if total >= 1e6 else f"{total / 1e3:.0f} kB"
        shares = ", ".join(f"{n / total:.0%} {kind}" for kind, n in self.bytes_by_kind.items() if n)
        return f"{self.label} ({size} of weights: {shares})"


def weight_precision(model_path: str) -> Precision:
    """The precision most of the model's weight bytes are stored in."""
    from frame.engine.model import read_structure

    structure = read_structure(model_path)
    integer_inputs = {n.inputs[0] for n in structure.nodes if n.op_type in INTEGER_CONSUMERS and n.inputs}
    integer_inputs |= {n.inputs[1] for n in structure.nodes if n.op_type in INTEGER_CONSUMERS[1:] and len(n.inputs) > 1}
    kinds = {"uint8": 0, "fp16": 0, "fp32": 0}
    for name, ref in structure.weights.items():
        if ref.dtype in (np.dtype(np.int8), np.dtype(np.uint8)) and name in integer_inputs:
            kinds["uint8"] += ref.nbytes
        elif ref.dtype == np.float16:
            kinds["fp16"] += ref.nbytes
        elif ref.dtype == np.float32:
            kinds["fp32"] += ref.nbytes
    label = "uint8" if kinds["uint8"] else max(("fp16", "fp32"), key=lambda k: kinds[k])
    return Precision(label, kinds)


def describe_folder(folder: str | Path, vae_tile: int | None = None) -> Iterator[tuple[str, str]]:
    """(level, line) pairs for a local model folder: "info" lines with the precisions, a "warning"
    when the VAE decoder's fixed input size cannot be tiled."""
    from frame.diffusion.vae.shapes import check_vae

    root = Path(folder)
    parts = []
    for component in COMPONENTS:
        path = root / component / "model.onnx"
        if path.is_file():
            try:
                parts.append(f"{component} {weight_precision(str(path)).describe()}")
            except Exception as exc:  # noqa: BLE001 - a broken file is reported, not raised, here
                parts.append(f"{component} unreadable ({exc})")
    if parts:
        yield "info", "weights: " + "; ".join(parts)
    if (root / "unet" / "model.onnx").is_file():
        yield "info", ("image-to-image (more like this): available" if (root / "vae_encoder" / "model.onnx").is_file()
                       else "image-to-image (more like this): not available, the folder has no vae_encoder/model.onnx "
                            "(optimum-cli export onnx writes one)")
    vae = root / "vae_decoder" / "model.onnx"
    if vae.is_file():
        try:
            shapes = check_vae(str(vae), vae_tile or DEFAULT_TILE)
        except Exception as exc:  # noqa: BLE001
            yield "warning", f"vae_decoder could not be inspected: {exc}"
            return
        if shapes.warning(str(vae)):
            yield "warning", shapes.warning(str(vae))
        elif shapes.note():
            yield "info", shapes.note()
