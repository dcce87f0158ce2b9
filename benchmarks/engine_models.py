"""Real trained models from PyPI wheels: frame's engine vs onnxruntime — match, time and peak memory.

Dev-only (onnxruntime; transformers + torch to export MiniLM; scipy for the text-box decision). The
models, their pinned versions and sha256 sums, inputs and decisions are in ``model_suite.py``.
Each runtime runs each model in a child process of its own: it loads the model, runs it once to
warm up, then ``--repeat`` timed runs; its peak memory is its own ``VmHWM`` (imports, load and runs).
Time per run is the median over the runs, reported as wall and CPU time (user+sys of the whole
process, all threads: the fairer number on a shared machine); each child pair is run ``--rounds``
times and the median round is reported. Both runtimes use their library default threads.

A model *matches* when every output is within 1e-3 of the output's scale (max |frame − ort| divided
by max |ort|) and both runtimes' outputs lead to the same decision (top-1, boxes over threshold,
decoded text, speech segments, nearest sentence). Usage:

    .venv/bin/python benchmarks/engine_models.py [--cache DIR] [--models a,b] [--rounds 3] [--repeat 5]

The cache (default ``~/.cache/frame/engine-models``) holds the downloaded wheels, the extracted and
exported models, inputs and outputs; a second run downloads nothing.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import model_suite  # noqa: E402  (the script's own directory)

DEFAULT_CACHE = Path(os.environ.get("FRAME_MODEL_CACHE", Path.home() / ".cache" / "frame" / "engine-models"))
TOLERANCE = 1e-3
NOTABLE = ("If", "Loop", "Scan", "LSTM", "GRU", "RNN", "ConvTranspose", "Resize", "Softmax", "MatMul")


# ------------------------------------------------------------------------------------------ child
def _stream(call, inputs: dict) -> list[np.ndarray]:
    """silero-vad as its wrapper drives it: 512-sample chunks with 64 samples of context, state carried."""
    audio, rate = inputs["audio"], inputs["sr"]
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros(64, np.float32)
    probabilities = []
    for start in range(0, audio.size - 511, 512):
        chunk = audio[start:start + 512]
        out = call({"input": np.concatenate([context, chunk])[None], "state": state, "sr": rate})
        probabilities.append(out[0])
        state, context = out[1], chunk[-64:]
    return [np.concatenate(probabilities), state]


def child(args: argparse.Namespace) -> None:
    start = time.perf_counter()
    if args.runtime == "onnxruntime":
        import onnxruntime

        session = onnxruntime.InferenceSession(args.model, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]

        def call(feeds):
            return session.run(names, feeds)
    else:
        from frame.engine import load_model

        model = load_model(args.model)

        def call(feeds):
            return list(model.run(feeds).values())
    load_seconds = time.perf_counter() - start
    inputs = dict(np.load(args.inputs))
    run = (lambda: _stream(call, inputs)) if args.run == "stream" else (lambda: call(inputs))
    outputs = run()
    walls, cpus = [], []
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        outputs = run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    np.savez(args.out, *outputs)
    status = Path("/proc/self/status").read_text()
    peak_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
    print(json.dumps({"load": load_seconds, "wall": statistics.median(walls), "cpu": statistics.median(cpus),
                      "peak_mb": peak_kb / 1024}))


# ----------------------------------------------------------------------------------------- parent
def _measure(runtime: str, model: Path, inputs: Path, out: Path, spec, repeat: int) -> dict:
    command = [sys.executable, __file__, "--child", runtime, "--model", str(model), "--inputs", str(inputs),
               "--out", str(out), "--run", spec.run, "--repeat", str(repeat)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{spec.name} on {runtime} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def op_summary(model: Path) -> str:
    import onnx

    counts: collections.Counter = collections.Counter()

    def walk(graph):
        for node in graph.node:
            counts[node.op_type] += 1
            for attr in node.attribute:
                for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs):
                    walk(sub)

    walk(onnx.load(str(model), load_external_data=False).graph)
    shown = [op for op, _ in counts.most_common(2) if op != "Constant"]
    shown += [op for op in NOTABLE if op in counts and op not in shown]
    return f"{sum(counts.values())} nodes: " + ", ".join(f"{op} {counts[op]}" for op in shown[:6])


def scale_error(frame: list[np.ndarray], reference: list[np.ndarray]) -> float:
    worst = 0.0
    for got, want in zip(frame, reference):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        if got.shape != want.shape:
            return float("inf")
        worst = max(worst, float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)) if want.size else 0.0)
    return worst


def benchmark(spec, cache: Path, rounds: int, repeat: int) -> dict:
    model = model_suite.fetch_model(spec, cache)
    inputs = spec.inputs(model)
    work = cache / "runs" / spec.name
    work.mkdir(parents=True, exist_ok=True)
    np.savez(work / "inputs.npz", **inputs)
    measured: dict[str, list[dict]] = {"onnxruntime": [], "frame": []}
    for _ in range(rounds):
        for runtime in measured:
            measured[runtime].append(_measure(runtime, model, work / "inputs.npz", work / f"{runtime}.npz", spec,
                                              repeat))
    outputs = {rt: [a for _, a in sorted(np.load(work / f"{rt}.npz").items(), key=lambda kv: int(kv[0][4:]))]
               for rt in measured}
    decide = model_suite.bind(spec, model, inputs)
    decisions = {rt: decide(outputs[rt]) for rt in measured}
    same = spec.same or (lambda a, b: a == b)
    error = scale_error(outputs["frame"], outputs["onnxruntime"])

    def median(runtime: str, key: str) -> float:
        return statistics.median(m[key] for m in measured[runtime])

    return {"name": spec.name, "family": spec.family, "package": spec.package, "ops": op_summary(model),
            "error": error, "same_decision": bool(same(decisions["frame"], decisions["onnxruntime"])),
            "decision": decisions["onnxruntime"], "frame_decision": decisions["frame"],
            "match": bool(error <= TOLERANCE and same(decisions["frame"], decisions["onnxruntime"])),
            **{f"{rt}_{key}": median(rt, key) for rt in measured for key in ("wall", "cpu", "peak_mb", "load")}}


def _decision_text(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def report(results: list[dict]) -> str:
    lines = ["| model | source package | ops | match | error | time ×ORT wall (CPU) | peak memory ×ORT | "
             "decision |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        wall = r["frame_wall"] / r["onnxruntime_wall"]
        cpu = r["frame_cpu"] / r["onnxruntime_cpu"]
        memory = r["frame_peak_mb"] / r["onnxruntime_peak_mb"]
        lines.append(
            f"| {r['name']} — {r['family']} | {r['package']} | {r['ops']} | {'yes' if r['match'] else '**no**'} | "
            f"{r['error']:.1e} | {wall:.2f} ({cpu:.2f}) — {r['frame_wall'] * 1e3:.1f} vs "
            f"{r['onnxruntime_wall'] * 1e3:.1f} ms | {memory:.2f} — {r['frame_peak_mb']:.0f} vs "
            f"{r['onnxruntime_peak_mb']:.0f} MB | {_decision_text(r['decision'])} |")
    walls = [r["frame_wall"] / r["onnxruntime_wall"] for r in results]
    cpus = [r["frame_cpu"] / r["onnxruntime_cpu"] for r in results]
    memories = [r["frame_peak_mb"] / r["onnxruntime_peak_mb"] for r in results]
    lines.append("")
    lines.append(f"median time ratio: {statistics.median(walls):.2f} wall, {statistics.median(cpus):.2f} CPU; "
                 f"peak memory ratio: max {max(memories):.2f}; matching: "
                 f"{sum(r['match'] for r in results)}/{len(results)}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--models", default="", help="comma-separated subset of: " +
                        ", ".join(s.name for s in model_suite.specs()))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", choices=("onnxruntime", "frame"), dest="runtime", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--run", default="single", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runtime:
        child(args)
        return
    wanted = set(filter(None, args.models.split(",")))
    results = []
    for spec in model_suite.specs():
        if wanted and spec.name not in wanted:
            continue
        result = benchmark(spec, args.cache, args.rounds, args.repeat)
        results.append(result)
        print(f"{spec.name}: match={result['match']} error={result['error']:.1e} "
              f"wall x{result['frame_wall'] / result['onnxruntime_wall']:.2f} "
              f"cpu x{result['frame_cpu'] / result['onnxruntime_cpu']:.2f} "
              f"peak x{result['frame_peak_mb'] / result['onnxruntime_peak_mb']:.2f} "
              f"decision {_decision_text(result['frame_decision'])}", flush=True)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
