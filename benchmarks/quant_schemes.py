"""Which 8-bit weight scheme: error of each candidate on the tiny pipelines, a full-size UNet and real weights.

Candidates (``frame.convert.quantize.Scheme``): symmetric int8 vs asymmetric uint8, min/max vs
percentile clipping vs a per-channel MSE search for the range, round-to-nearest vs truncation, and
OnnxStream's per-tensor scheme as a reference. Plus the "what stays in higher precision" choices
(``frame.convert.policy.Policy``) and fp16. Three measurements, each printed as a table:

* ``--tiny``: the committed tiny SD 1.5 and SDXL pipelines (tests/fixtures/pipelines): the final
  picture of several prompts/seeds from converted weights vs the fp32 picture, PSNR (dB);
* ``--unet PATH``: any full-size UNet ``model.onnx`` (SD 1.5 or SDXL; default the SD 1.5 export of
  ``benchmarks/engine_vs_onnxruntime.py``): one evaluation in frame's engine, relative L2 error of
  the output vs the fp32 output, each conversion done with ``frame model convert``'s code;
  ``--ort`` adds our uint8 file and the fp32 model run by onnxruntime, and ``--ort-quantize``
  onnxruntime's own ``quantize_dynamic`` (int8 weights *and* activations, per channel and per tensor),
  as reference points. quantize_dynamic holds the whole model several times over: 10.5 GB peak for
  the 3.4 GB SD 1.5 UNet, so it cannot run on SDXL's 10 GB UNet on a 24 GB machine;
* ``--real``: weights nobody here made (PP-OCRv4 detection and recognition nets from the
  ``rapidocr-onnxruntime`` wheel, fetched with ``pip download``): each scheme's weights substituted
  into the model (fake quantization), output relative L2 error on a rendered text image.

    .venv/bin/python benchmarks/quant_schemes.py --tiny --real
    .venv/bin/python benchmarks/quant_schemes.py --unet /work/cache/sd15-full/unet/model.onnx --ort [--ort-quantize]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from frame.convert.files import Options, convert_file, read_source  # noqa: E402
from frame.convert.policy import Policy  # noqa: E402
from frame.convert.quantize import Scheme, dequantize, quantize  # noqa: E402

SCHEMES = {
    "int8 sym, min/max": Scheme(symmetric=True),
    "uint8 asym, min/max (default)": Scheme(symmetric=False),
    "int8 sym, p99.99": Scheme(symmetric=True, percentile=99.99),
    "uint8 asym, p99.99": Scheme(symmetric=False, percentile=99.99),
    "int8 sym, p99.9": Scheme(symmetric=True, percentile=99.9),
    "int8 sym, MSE range": Scheme(symmetric=True, mse_search=True),
    "uint8 asym, MSE range": Scheme(symmetric=False, mse_search=True),
    "uint8 asym, min/max, truncate": Scheme(symmetric=False, rounding="truncate"),
    "OnnxStream: per tensor, p99.9, truncate": Scheme(symmetric=False, percentile=99.9, rounding="truncate",
                                                      per_tensor=True),
}
POLICIES = {
    "io convs 8-bit too": Policy(keep_io_convs=False),
}
TINY = ROOT / "tests" / "fixtures" / "pipelines"
PROMPTS = [("a lighthouse on a cliff at dusk, oil painting", 1), ("a bowl of fruit, still life", 2),
           ("portrait of an old fisherman, charcoal", 3)]


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255.0 ** 2 / mse))


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


# ------------------------------------------------------------------------------------ tiny pipelines
def convert_pipeline(src: Path, dst: Path, options_for) -> None:
    """Copy ``src`` to ``dst`` converting each component with ``options_for(component)`` (None = as is)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.onnx", "*.onnx_data"))
    for model in sorted(src.glob("*/model.onnx")):
        options = options_for(model.parent.name)
        target = dst / model.parent.name / "model.onnx"
        if options is None:
            shutil.copy(model, target)
            if (model.parent / "model.onnx_data").exists():
                shutil.copy(model.parent / "model.onnx_data", dst / model.parent.name / "model.onnx_data")
        else:
            convert_file(model, target, options)


def pictures(folder: Path, kind: str) -> list[np.ndarray]:
    from frame.diffusion import load_pipeline

    pipe = load_pipeline(folder)
    guidance = 5.0 if kind == "sdxl" else 7.5
    return [np.asarray(pipe.generate(pipe.settings(prompt, steps=6, guidance=guidance, sampler="euler", seed=seed,
                                                   width=128, height=128))) for prompt, seed in PROMPTS]


def tiny_variants() -> dict[str, callable]:
    variants = {"fp16": lambda c: Options("fp16")}
    for name, scheme in SCHEMES.items():
        variants[f"uint8: {name}"] = (lambda s: lambda c: Options("uint8", scheme=s))(scheme)
    for name, policy in POLICIES.items():
        variants[f"uint8 default, {name}"] = (lambda p: lambda c: Options("uint8", policy=p))(policy)
    variants["uint8 default, text encoders fp16"] = lambda c: Options("fp16" if c.startswith("text_encoder")
                                                                      else "uint8")
    variants["uint8 default, only the UNet 8-bit (rest fp16)"] = lambda c: Options("uint8" if c == "unet" else "fp16")
    return variants


def run_tiny() -> None:
    print("\n## tiny pipelines: final picture PSNR vs fp32 (6 euler steps, 128x128, 3 prompts/seeds; "
          "mean / worst dB)")
    print(f"| variant | {' | '.join(k for k in ('sd15', 'sdxl'))} |\n|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        references = {kind: pictures(TINY / kind / "model", kind) for kind in ("sd15", "sdxl")}
        for label, options_for in tiny_variants().items():
            cells = []
            for kind in ("sd15", "sdxl"):
                folder = Path(tmp) / f"{kind}-{len(os.listdir(tmp))}"
                convert_pipeline(TINY / kind / "model", folder, options_for)
                values = [psnr(p, r) for p, r in zip(pictures(folder, kind), references[kind])]
                cells.append(f"{np.mean(values):.1f} / {min(values):.1f}")
                shutil.rmtree(folder)
            print(f"| {label} | {' | '.join(cells)} |", flush=True)


# -------------------------------------------------------------------------------------- full-size UNet
def unet_feeds(path: Path) -> dict[str, np.ndarray]:
    """One evaluation's inputs, shaped from the model's declared inputs (SD 1.5 or SDXL)."""
    import onnx

    rng = np.random.default_rng(0)
    inputs = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in onnx.load(str(path), load_external_data=False).graph.input}
    context = inputs["encoder_hidden_states"][2] or 768
    feeds = {"sample": rng.standard_normal((1, 4, 64, 64)).astype(np.float32),
             "timestep": np.array([999.0], np.float32),
             "encoder_hidden_states": rng.standard_normal((1, 77, context)).astype(np.float32)}
    if "text_embeds" in inputs:
        feeds["sample"] = rng.standard_normal((1, 4, 128, 128)).astype(np.float32)
        feeds["text_embeds"] = rng.standard_normal((1, inputs["text_embeds"][1] or 1280)).astype(np.float32)
        feeds["time_ids"] = np.array([[1024, 1024, 0, 0, 1024, 1024]], np.float32)
    return feeds


def child_run(runtime: str, model: str, feeds_path: str, out_path: str) -> None:
    """In a subprocess: one evaluation, output saved, peak RSS (VmHWM) and times printed."""
    with np.load(feeds_path) as data:
        feeds = {k: data[k] for k in data.files}
    started, cpu = time.perf_counter(), time.process_time()
    if runtime == "frame":
        from frame.engine import load_model

        with load_model(model) as m:
            output = next(iter(m.run(feeds).values()))
    else:
        import onnxruntime as ort

        options = ort.SessionOptions()
        if runtime == "ort-noopt":
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        output = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.save(out_path, output)
    hwm = next(int(line.split()[1]) / 1024 for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("VmHWM:"))
    print(json.dumps({"wall_s": round(time.perf_counter() - started, 1), "cpu_s": round(time.process_time() - cpu, 1),
                      "peak_rss_mb": round(hwm, 1)}))


def evaluate(runtime: str, model: Path, feeds_path: Path, work: Path) -> tuple[np.ndarray, dict]:
    out = work / "out.npy"
    done = subprocess.run([sys.executable, __file__, "--child", runtime, str(model), str(feeds_path), str(out)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode:
        raise RuntimeError(f"{runtime} on {model} failed: {done.stderr[-2000:]}")
    return np.load(out), json.loads(done.stdout.strip().splitlines()[-1])


def run_unet(path: Path, with_ort: bool, work_root: Path, only: list[str] | None, ort_quantize: bool = False
             ) -> None:
    print(f"\n## full-size UNet {path}: output relative L2 error vs fp32 (one evaluation)")
    work = Path(tempfile.mkdtemp(prefix="quant-unet-", dir=work_root))
    try:
        feeds_path = work / "feeds.npz"
        np.savez(feeds_path, **unet_feeds(path))
        reference, info = evaluate("frame", path, feeds_path, work)
        print(f"fp32 in frame: {info}")
        print("| weights | runtime | rel L2 vs fp32 | weight bytes | peak RSS MB | CPU s |\n|---|---|---|---|---|---|")
        variants = {"fp16": Options("fp16")}
        variants.update({f"uint8: {n}": Options("uint8", scheme=s) for n, s in SCHEMES.items()})
        variants.update({f"uint8 default, {n}": Options("uint8", policy=p) for n, p in POLICIES.items()})
        for label, options in variants.items():
            if only and not any(o in label for o in only):
                continue
            target = work / "converted" / "model.onnx"
            target.parent.mkdir(exist_ok=True)
            report = convert_file(path, target, options)
            output, info = evaluate("frame", target, feeds_path, work)
            print(f"| {label} | frame | {rel_l2(output, reference):.2e} | {report.bytes_after / 1e6:.0f} MB | "
                  f"{info['peak_rss_mb']:.0f} | {info['cpu_s']:.0f} |", flush=True)
            if with_ort and label == "uint8: uint8 asym, min/max (default)":
                for runtime in ("ort", "ort-noopt"):
                    output, info = evaluate(runtime, target, feeds_path, work)
                    print(f"| {label} | onnxruntime{' (no graph optimizations)' if runtime == 'ort-noopt' else ''}"
                          f" | {rel_l2(output, reference):.2e} | | {info['peak_rss_mb']:.0f} | {info['cpu_s']:.0f} |",
                          flush=True)
            shutil.rmtree(target.parent)
        if with_ort or ort_quantize:
            run_ort_quantize_dynamic(path, feeds_path, work, reference, ort_quantize)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_ort_quantize_dynamic(path: Path, feeds_path: Path, work: Path, reference: np.ndarray, quantize: bool
                             ) -> None:
    """onnxruntime's fp32 run, and (``quantize``) its own quantize_dynamic as the reference point
    (int8 weights, activations quantized at run time)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32_ort, info = evaluate("ort", path, feeds_path, work)
    print(f"| fp32 | onnxruntime | {rel_l2(fp32_ort, reference):.2e} | | {info['peak_rss_mb']:.0f} | "
          f"{info['cpu_s']:.0f} |", flush=True)
    for per_channel in (True, False) if quantize else ():
        target = work / f"ortq-{per_channel}" / "model.onnx"
        target.parent.mkdir(exist_ok=True)
        quantize_dynamic(str(path), str(target), per_channel=per_channel, weight_type=QuantType.QInt8,
                         use_external_data_format=True)
        try:
            output, info = evaluate("ort", target, feeds_path, work)
            print(f"| onnxruntime quantize_dynamic, QInt8, per_channel={per_channel} | onnxruntime | "
                  f"{rel_l2(output, reference):.2e} | | {info['peak_rss_mb']:.0f} | {info['cpu_s']:.0f} |", flush=True)
        except RuntimeError as exc:
            print(f"| onnxruntime quantize_dynamic, per_channel={per_channel} | onnxruntime | failed: "
                  f"{str(exc).splitlines()[-1][:120]} | | | |", flush=True)
        shutil.rmtree(target.parent)


# ---------------------------------------------------------------------------------------- real weights
REAL_WHEEL = "rapidocr-onnxruntime==1.4.4"
REAL_MODELS = ("ch_PP-OCRv4_det_infer.onnx", "ch_PP-OCRv4_rec_infer.onnx")


def real_models(cache: Path) -> list[Path]:
    folder = cache / "rapidocr_onnxruntime" / "models"
    if not all((folder / m).is_file() for m in REAL_MODELS):
        import zipfile

        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, REAL_WHEEL],
                           check=True)
            wheel = next(Path(tmp).glob("*.whl"))
            with zipfile.ZipFile(wheel) as archive:
                for name in REAL_MODELS:
                    archive.extract(f"rapidocr_onnxruntime/models/{name}", cache)
    return [folder / m for m in REAL_MODELS]


def text_image(height: int, width: int) -> np.ndarray:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    for row in range(0, height, 24):
        draw.text((4, row + 4), "Stable Diffusion on a Pi Zero 2 W, 512 MB: frame 0123456789", fill="black")
    array = np.asarray(image, np.float32) / 255.0
    return ((array - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32)


def _weight_tensors(model) -> list:
    """(holder, axis) of every Conv/MatMul weight stored as an initializer or a Constant node."""
    from onnx import numpy_helper  # noqa: F401

    consts = {n.output[0]: n for n in model.graph.node if n.op_type == "Constant"}
    inits = {t.name: t for t in model.graph.initializer}
    found = []
    for node in model.graph.node:
        if node.op_type in ("Conv", "MatMul") and len(node.input) > 1:
            name = node.input[1]
            tensor = inits.get(name)
            if tensor is None and name in consts:
                tensor = next((a.t for a in consts[name].attribute if a.name == "value"), None)
            if tensor is not None and len(tensor.dims) >= 2:
                found.append((tensor, 0 if node.op_type == "Conv" else 1))
    return found


def run_real(cache: Path) -> None:
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    print("\n## real trained weights (PP-OCRv4 det/rec, rapidocr-onnxruntime wheel): output rel L2 vs fp32, "
          "fake-quantized weights")
    models = real_models(cache)
    shapes = {"ch_PP-OCRv4_det_infer.onnx": (1, 3, 320, 320), "ch_PP-OCRv4_rec_infer.onnx": (1, 3, 48, 320)}
    print("| scheme | " + " | ".join(m.name.split("_infer")[0] for m in models) + " |\n|---|---|---|")
    rows: dict[str, list[str]] = {}
    for path in models:
        feeds_image = text_image(*shapes[path.name][2:])
        base = onnx.load(str(path))
        name = base.graph.input[0].name

        def run(model, name=name, feeds_image=feeds_image) -> np.ndarray:
            session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            return session.run(None, {name: feeds_image})[0]

        reference = run(base)
        for label, scheme in {"fp16": None, **SCHEMES}.items():
            model = onnx.ModelProto()
            model.CopyFrom(base)
            for tensor, axis in _weight_tensors(model):
                weight = numpy_helper.to_array(tensor).astype(np.float32)
                decoded = weight.astype(np.float16).astype(np.float32) if scheme is None else \
                    dequantize(quantize(weight, axis, scheme))
                tensor.CopyFrom(numpy_helper.from_array(decoded, tensor.name))
            rows.setdefault(label, []).append(f"{rel_l2(run(model), reference):.2e}")
    for label, cells in rows.items():
        print(f"| {label} | {' | '.join(cells)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--unet", nargs="?", const="/work/cache/sd15-full/unet/model.onnx")
    parser.add_argument("--ort", action="store_true", help="with --unet: onnxruntime runs of fp32 and our uint8")
    parser.add_argument("--ort-quantize", action="store_true",
                        help="with --unet: onnxruntime's quantize_dynamic too (needs ~3x the fp32 model in RAM)")
    parser.add_argument("--only", help="with --unet: comma-separated substrings of the variants to run")
    parser.add_argument("--real", action="store_true")
    parser.add_argument("--cache", type=Path, default=Path("/work/cache/real"))
    parser.add_argument("--work", type=Path, default=Path("/work/cache"), help="where temporary conversions go")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_run(*args.child)
        return
    if args.tiny:
        run_tiny()
    if args.real:
        run_real(args.cache)
    if args.unet:
        source = read_source(Path(args.unet))
        print(f"UNet {args.unet}: {len(source.weights)} initializers, {source.nbytes / 1e9:.2f} GB")
        run_unet(Path(args.unet), args.ort, args.work, args.only.split(",") if args.only else None,
                 args.ort_quantize)


if __name__ == "__main__":
    main()
