"""LoRA safetensors files for tests, written with numpy (no torch): well-formed ones for the demo model
and the malformed or hostile kinds an attack round tried (issue 40 items 4, 8 and 10). Each maker
writes one file and returns its path; what it holds is in its name and docstring."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}
# two of the demo UNet's attention layers ([32, 32] MatMul weights) and one of its text encoder's
DEMO_MODULES = ("lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_q",
                "lora_unet_mid_block_attentions_0_transformer_blocks_0_attn2_to_q",
                "lora_te_text_model_encoder_layers_0_self_attn_q_proj")


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None,
                      header: dict[str, Any] | None = None) -> Path:
    """A safetensors file of ``tensors`` (``header`` entries replace or add to the written ones as given:
    the malformed cases)."""
    entries: dict[str, Any] = {}
    data = b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
        entries[name] = {"dtype": _DTYPES[array.dtype], "shape": list(array.shape),
                         "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    entries.update(header or {})
    if metadata is not None:
        entries["__metadata__"] = metadata
    text = json.dumps(entries).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


def lora_tensors(modules: tuple[str, ...] = DEMO_MODULES, rank: int = 2, width: int = 32, alpha: float | None = None,
                 seed: int = 0, std: float = 0.3) -> dict[str, np.ndarray]:
    """kohya keys for ``modules`` of [width, width] layers, random factors, ``alpha`` keys when given."""
    rng = np.random.default_rng(seed)
    out = {}
    for module in modules:
        out[f"{module}.lora_down.weight"] = (rng.standard_normal((rank, width)) * std).astype(np.float32)
        out[f"{module}.lora_up.weight"] = (rng.standard_normal((width, rank)) * std).astype(np.float32)
        if alpha is not None:
            out[f"{module}.alpha"] = np.array(alpha, dtype=np.float32)
    return out


def demo_lora(path: Path, **kwargs: Any) -> Path:
    """A LoRA that changes three layers of the bundled demo model."""
    return write_safetensors(path, lora_tensors(**kwargs))


def nowhere_lora(path: Path) -> Path:
    """A well-formed LoRA whose modules name no layer of any model (it matches 0 layers)."""
    return write_safetensors(path, lora_tensors(("lora_unet_no_such_block_to_q", "lora_te_no_such_layer_q_proj")))


def non_finite_lora(path: Path, where: str = "up", value: float = float("nan")) -> Path:
    """The demo LoRA with one ``value`` (NaN, inf) in a factor (``where`` "up"/"down") or as its alpha."""
    tensors = lora_tensors(alpha=4.0 if where != "alpha" else value)
    key = f"{DEMO_MODULES[1]}.lora_{where}.weight"
    if where in ("up", "down"):
        tensors[key].flat[3] = value
    return write_safetensors(path, tensors)


def malformed_lora(path: Path, kind: str) -> Path:
    """One of the malformed kinds: ``rank_zero`` (down [0, 32], up [32, 0]), ``off_float`` (float data
    offsets), ``up_1d`` (a 1-D up), ``down_scalar`` (a 0-D down), ``alpha_empty`` (alpha of no element),
    ``huge_shape`` (a shape of 2^40 rows with no data), ``metadata_list`` (``__metadata__`` a list),
    ``off_string`` (offsets as strings), ``dtype_list`` (a dtype that is a list), ``inf_shape`` (an axis
    of 1e999), ``deep_header`` (JSON nested 100,000 deep)."""
    module = DEMO_MODULES[0]
    tensors = lora_tensors((module,))
    header: dict[str, Any] = {}
    if kind == "rank_zero":
        tensors = {f"{module}.lora_down.weight": np.zeros((0, 32), np.float32),
                   f"{module}.lora_up.weight": np.zeros((32, 0), np.float32)}
    elif kind == "off_float":
        write_safetensors(path, tensors)
        head = json.loads(path.read_bytes()[8:8 + struct.unpack("<Q", path.read_bytes()[:8])[0]])
        header = {name: {**entry, "data_offsets": [float(v) for v in entry["data_offsets"]]}
                  for name, entry in head.items()}
    elif kind == "up_1d":
        tensors[f"{module}.lora_up.weight"] = np.zeros(64, np.float32)
        tensors[f"{module}.lora_down.weight"] = np.zeros((2, 32), np.float32)
    elif kind == "down_scalar":
        tensors[f"{module}.lora_down.weight"] = np.array(1.0, np.float32)
    elif kind == "alpha_empty":
        tensors[f"{module}.alpha"] = np.zeros(0, np.float32)
    elif kind == "huge_shape":
        header = {f"{module}.lora_down.weight": {"dtype": "F32", "shape": [1 << 40, 0], "data_offsets": [0, 0]}}
    elif kind == "metadata_list":
        header = {"__metadata__": ["lora_adapter_metadata"]}
    elif kind == "off_string":
        write_safetensors(path, tensors)
        head = json.loads(path.read_bytes()[8:8 + struct.unpack("<Q", path.read_bytes()[:8])[0]])
        header = {name: {**entry, "data_offsets": [str(v) for v in entry["data_offsets"]]}
                  for name, entry in head.items()}
    elif kind == "dtype_list":
        header = {f"{module}.lora_down.weight": {"dtype": ["F32"], "shape": [2, 32], "data_offsets": [0, 256]}}
    elif kind == "inf_shape":
        text = json.dumps({f"{module}.lora_down.weight": {"dtype": "F32", "shape": [2, 32], "data_offsets": [0, 256]}})
        text = text.replace("[2, 32]", "[1e999, 32]")
        raw = text.encode()
        path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 256)
        return path
    elif kind == "deep_header":
        raw = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        path.write_bytes(struct.pack("<Q", len(raw)) + raw)
        return path
    else:
        raise ValueError(kind)
    return write_safetensors(path, tensors, header=header)


MALFORMED = ("rank_zero", "off_float", "up_1d", "down_scalar", "alpha_empty", "huge_shape", "metadata_list",
             "off_string", "dtype_list", "inf_shape", "deep_header")
