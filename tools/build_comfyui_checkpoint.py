"""The smallest SD 1.5 checkpoint ComfyUI 0.3.75 loads: random weights in the original single-file layout.

``tests/remote/test_real_comfyui.py`` paints with it on ComfyUI's own server. The tiny fixture
``tests/fixtures/checkpoints/sd15.safetensors`` cannot serve there: ComfyUI's ``CheckpointLoaderSimple``
guesses the model from its UNet's widths (``comfy/supported_models.py``: SD 1.5 is ``model_channels``
320 with a ``context_dim`` of 768) and says "Could not detect model type" for anything narrower, and it
builds the text encoder (CLIP ViT-L, 12 layers) and the VAE (128 channels, ``ch_mult`` 1, 2, 4, 4) at
their fixed published sizes, refusing weights of any other shape. So CLIP and the VAE here are full
size (every key and shape of ``tests/fixtures/checkpoints/manifests/sd15.json.gz``), and only the UNet
is cut down: one level of 320 channels (one ResBlock and one cross-attention transformer down, the
same in the middle, two up), which ComfyUI detects as ``channel_mult [1]``, ``num_res_blocks [1]``.
That is about 230 M parameters, 440 MB in float16: built where the test runs (about 10 s), never
committed. Each tensor's shape is a full-size one, taken from the manifest (the one-level UNet's
blocks have exactly the shapes of the full UNet's first input and last output blocks).

The weights are seeded random (``SEED``): fan-in scaled normals, norm weights 1 and biases 0, so the
activations stay finite and the picture is noise of the asked size. Needs numpy and safetensors only.

    python tools/build_comfyui_checkpoint.py OUT.safetensors
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "tests/fixtures/checkpoints/manifests/sd15.json.gz"
SEED = 7514
UNET = "model.diffusion_model."
# the one-level UNet's blocks: its name prefix -> the full UNet's block of the same shapes
UNET_BLOCKS = {"time_embed.": "time_embed.", "input_blocks.0.": "input_blocks.0.", "input_blocks.1.": "input_blocks.1.",
               "middle_block.0.": "input_blocks.1.0.", "middle_block.1.": "input_blocks.1.1.",
               "middle_block.2.": "input_blocks.1.0.", "output_blocks.0.": "output_blocks.11.",
               "output_blocks.1.": "output_blocks.11.", "out.": "out."}


def layout(manifest: dict) -> dict[str, tuple[str, list[int]]]:
    """Every key of the small checkpoint with its (dtype, shape)."""
    tensors = {name: (kind, shape) for name, (kind, shape) in manifest["tensors"].items()}
    keys = {name: spec for name, spec in tensors.items() if not name.startswith(UNET)}
    for small, full in UNET_BLOCKS.items():
        found = {name[len(UNET + full):]: spec for name, spec in tensors.items() if name.startswith(UNET + full)}
        if not found:
            raise SystemExit(f"{MANIFEST}: no {UNET}{full}* keys")
        keys.update({UNET + small + rest: spec for rest, spec in found.items()})
    return keys


def values(name: str, kind: str, shape: list[int], rng: np.random.Generator) -> np.ndarray:
    if kind == "I64":  # CLIP's position_ids
        return np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    if name.endswith(".bias"):
        return np.zeros(shape, np.float16)
    if len(shape) == 1:  # GroupNorm / LayerNorm scale
        return np.ones(shape, np.float16)
    fan_in = math.prod(shape[1:])
    return (rng.standard_normal(shape, dtype=np.float32) / math.sqrt(fan_in)).astype(np.float16)


def build(path: Path) -> Path:
    """Write the checkpoint to ``path`` (through a temporary name, so a half-written file is never used)."""
    from safetensors.numpy import save_file

    manifest = json.loads(gzip.decompress(MANIFEST.read_bytes()))
    rng = np.random.default_rng(SEED)
    tensors = {name: values(name, kind, shape, rng) for name, (kind, shape) in sorted(layout(manifest).items())}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    save_file(tensors, str(partial), metadata={"format": "pt", "made_by": "frame tools/build_comfyui_checkpoint.py"})
    partial.replace(path)
    return path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    out = build(Path(argv[0]))
    print(f"{out}: {out.stat().st_size / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
