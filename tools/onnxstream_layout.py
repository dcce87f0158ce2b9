"""Write a diffusers ONNX export as OnnxStream's published SD folder layout (tests and owners).

    python tools/onnxstream_layout.py tests/fixtures/pipelines/sd15/model /tmp/sd15-onnxstream
    python tools/onnxstream_layout.py tests/fixtures/pipelines/sdxl/model /tmp/sdxl --turbo

SD 1.5 → ``tokenizer/``, ``text_encoder_fp32/``, ``unet_fp16/``, ``vae_decoder_fp16/``,
``vae_decoder_qu8/`` (+ ``range_data.txt``, calibrated here); SDXL → ``sdxl_tokenizer/``,
``sdxl_text_encoder_{1,2}_fp32/``, ``sdxl_unet_fp16/`` + ``sdxl_vae_decoder_32x32_fp16/`` (static tile
decoder, ``--tile`` latent pixels) + ``sdxl_vae_decoder_fp16/``, or with ``--turbo``
``sdxl_unet_anyshape_fp16/`` + ``sdxl_vae_decoder_anyshape_fp16/``.

Graph inputs and outputs get the names the published folders use, as OnnxStream's sd app reads them:
SD 1.5's text encoder reads ``onnx::Reshape_0`` and returns only its hidden state, its VAE reads
``input.1``; SDXL's encoders return ``out_0`` ... (``out_2 + k`` = hidden state k). Tokenizers:
``vocab.txt`` has one token per line in id order, ``merges.txt`` one merge per line.
Calibration (``range_data.txt``: ``op name,min,max`` of every op's output, 0.1 % / 99.9 %
percentiles over a few latents) runs the float model in onnxruntime (dev-only).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import onnxstream_convert as oc  # noqa: E402


def write_tokenizer(folder: Path, dest: Path) -> None:
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    tokens = sorted(vocab, key=vocab.get)
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        raise ValueError(f"{folder}/vocab.json: ids are not 0..{len(tokens) - 1}")
    merges = [line for i, line in enumerate((folder / "merges.txt").read_text(encoding="utf-8").split("\n"))
              if line.strip() and not (i == 0 and line.startswith("#version"))]
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "vocab.txt").write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    (dest / "merges.txt").write_text("".join(m + "\n" for m in merges), encoding="utf-8")


def keep_outputs(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """The model with only ``names`` as outputs and the nodes they need."""
    graph = model.graph
    kept = [o for o in graph.output if o.name in names]
    del graph.output[:]
    graph.output.extend(kept)
    needed = set(names)
    alive = []
    for node in reversed(graph.node):
        if any(o in needed for o in node.output):
            alive.append(node)
            needed.update(i for i in node.input if i)
    del graph.node[:]
    graph.node.extend(reversed(alive))
    used = {i for n in graph.node for i in n.input}
    initializers = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    return model


def percentile_range(values: np.ndarray) -> tuple[float, float] | None:
    finite = np.sort(values[np.isfinite(values)].astype(np.float64).reshape(-1))
    if finite.size < 2:
        return None
    low, high = float(finite[int(finite.size * 0.001)]), float(finite[int(finite.size * 0.001 * -1 - 1)])
    return (low, high) if low < high else None


def calibrate(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]) -> dict[str, tuple[float, float]]:
    """``{op name: (min, max)}`` of each op's first output over ``feeds`` (running min / max)."""
    import onnxruntime as ort

    probe = onnx.ModelProto.FromString(model.SerializeToString())
    inferred = onnx.shape_inference.infer_shapes(probe)
    known = {v.name: v for v in inferred.graph.value_info}
    outputs = {o.name for o in probe.graph.output}
    names = {}
    for node in probe.graph.node:
        if node.op_type == "Constant" or not node.output or node.output[0] not in known:
            continue
        names[node.output[0]] = node.name
        if node.output[0] not in outputs:
            probe.graph.output.append(known[node.output[0]])
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    wanted = [o.name for o in session.get_outputs() if o.name in names]
    ranges: dict[str, tuple[float, float]] = {}
    for feed in feeds:
        for value, array in zip(wanted, session.run(wanted, feed)):
            array = np.asarray(array)
            found = percentile_range(array.astype(np.float64)) if array.dtype.kind == "f" else None
            if found is None:
                continue
            op = names[value]
            low, high = ranges.get(op, found)
            ranges[op] = (min(low, found[0]), max(high, found[1]))
    return ranges


def write_range_data(ranges: dict[str, tuple[float, float]], path: Path) -> None:
    path.write_text("".join(f"{name},{low!r},{high!r}\n" for name, (low, high) in ranges.items()), encoding="utf-8")


def _load(folder: Path, component: str) -> onnx.ModelProto:
    return onnx.load(str(folder / component / "model.onnx"))


def write_sd15(src: Path, dest: Path, latent: int = 8, calibration_samples: int = 4) -> Path:
    write_tokenizer(src / "tokenizer", dest / "tokenizer")
    text = keep_outputs(_load(src, "text_encoder"), ["last_hidden_state"])
    oc.convert(text, dest / "text_encoder_fp32", "fp32", rename={"input_ids": "onnx::Reshape_0",
                                                                 "last_hidden_state": "2213"})
    oc.convert(_load(src, "unet"), dest / "unet_fp16", "fp16")
    vae = _load(src, "vae_decoder")
    vae_names = {"latent_sample": "input.1", "sample": "815"}
    oc.convert(vae, dest / "vae_decoder_fp16", "fp16", rename=vae_names)
    oc.convert(vae, dest / "vae_decoder_qu8", "qu8", rename=vae_names)
    scaling = json.loads((src / "vae_decoder" / "config.json").read_text()).get("scaling_factor", 0.18215)
    rng = np.random.RandomState(1234)
    feeds = [{"latent_sample": (rng.randn(1, 4, latent, latent) * 1.2 / scaling).astype(np.float32)}
             for _ in range(calibration_samples)]
    write_range_data(calibrate(vae, feeds), dest / "vae_decoder_qu8" / "range_data.txt")
    return dest


def _numbered_outputs(model: onnx.ModelProto) -> dict[str, str]:
    return {o.name: f"out_{i}" for i, o in enumerate(model.graph.output)}


def write_sdxl(src: Path, dest: Path, turbo: bool = False, tile: int = 4) -> Path:
    write_tokenizer(src / "tokenizer", dest / "sdxl_tokenizer")
    for index, component in ((1, "text_encoder"), (2, "text_encoder_2")):
        model = _load(src, component)
        oc.convert(model, dest / f"sdxl_text_encoder_{index}_fp32", "fp32", rename=_numbered_outputs(model))
    unet = _load(src, "unet")
    oc.convert(unet, dest / ("sdxl_unet_anyshape_fp16" if turbo else "sdxl_unet_fp16"), "fp16")
    vae = _load(src, "vae_decoder")
    if turbo:
        oc.convert(vae, dest / "sdxl_vae_decoder_anyshape_fp16", "fp16")
    else:
        oc.convert(vae, dest / "sdxl_vae_decoder_32x32_fp16", "fp16",
                   fixed_inputs={"latent_sample": [1, 4, tile, tile]})
        oc.convert(vae, dest / "sdxl_vae_decoder_fp16", "fp16")
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path, help="diffusers ONNX export folder (model_index.json)")
    parser.add_argument("dest", type=Path, help="output folder")
    parser.add_argument("--turbo", action="store_true", help="SDXL: write the anyshape UNet/VAE folders")
    parser.add_argument("--tile", type=int, default=32, help="SDXL: latent size of the tile decoder (default 32)")
    args = parser.parse_args(argv)
    index = json.loads((args.src / "model_index.json").read_text())
    if args.dest.exists():
        shutil.rmtree(args.dest)
    if "text_encoder_2" in index:
        write_sdxl(args.src, args.dest, args.turbo, args.tile)
    else:
        write_sd15(args.src, args.dest)
    print(f"wrote {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
