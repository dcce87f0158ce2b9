"""This machine's throughput, measured in a few seconds through the engine's own kernels.

Every probe is a small ONNX graph run by ``frame.engine.load_model`` with its weights in RAM, so
the measured path is the real one (planning, fusions, weight decoding, BLAS thread choice,
executor). Three fixed probes:

* ``gemm``: a 256 × 1280 → 1280 MatMul (fp32), the machine's large-GEMM rate (the reference the Pi's
  op efficiencies were read against once, ``benchmarks/estimate_pi_constants.py``; the Pi projection
  itself never uses a measurement, ``frame.estimate.pi``);
* ``element``: the memory-bound ops of a UNet resnet block and of a transformer block (GroupNorm as
  exported, SiLU, LayerNorm, GELU, residual Adds) at SD 1.5's sizes: memory traffic per second,
  counted as a model's is (``frame.engine.costs``), so the rate transfers;
* ``step``: 200 Adds of 4 × 4 tensors, the fixed cost of one engine step;

then the model's own heaviest step signatures (``frame.estimate.signature``) with their real
shapes and weight storage, cut down to about ``PROBE_MACS`` each (``frame.estimate.probes``),
the heaviest and the most weight-bound of each op in each component first, then heaviest first,
until ``budget_seconds`` are spent (the leaders are always probed). Signatures not probed run at
their op's rate for their weight reuse where its probes span two regimes (``rate_fit.op_costs``), else at
the average rate of their op in their own component (``Throughput.within``), else of their kind
there, else of their kind. Each probe runs once to warm up, then at least twice; the median run counts. Rates are per
second of wall time (what a night takes) or, with ``cpu=True``, per second of this process's CPU
time (steadier on a shared machine).
"""

from __future__ import annotations

import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from frame.engine import load_model
from frame.engine.io.http_settings import HttpSettings
from frame.estimate.counting import count_graph
from frame.estimate.probes import build_probe, decode_probe, matmul_probe, probe_model
from frame.estimate.rate_fit import WEIGHT_BOUND_REUSE_RATIO, kind_averages, op_averages, op_costs, weight_reuse
from frame.estimate.signature import Signature

FLOAT = onnx.TensorProto.FLOAT
PROBE_MACS = 300_000_000
GEMM_SIGNATURE = Signature("matmul", ((1, 256, 1280), (1280, 1280)))
WEIGHT_BOUND_MIN_SHARE = 0.03   # of an op's multiply-adds in a run, for its weight-bound leader


@dataclass
class Throughput:
    """Rates of the engine on one machine: multiply-adds, bytes or steps per second."""

    gemm_macs: float
    stream_bytes: float
    step_seconds: float
    kind_macs: dict[str, float]                       # conv / matmul / attention averages
    signature_macs: dict[Signature, float] = field(default_factory=dict)
    read_bytes: float | None = None                   # model storage or link; None when not measured
    cpu_share: float = 1.0                            # CPU seconds per wall second while measuring
    seconds: float = 0.0                              # how long the measurement took
    label: str = "this machine"
    op_macs: dict[str, float] = field(default_factory=dict)  # averages per signature op (norm_conv, ...)
    decode_seconds: dict[str, float] = field(default_factory=dict)  # per value decoded, by storage
    # a machine described by constants (the Pi) also fixes these; None: measured (the load timed while
    # counting, ``night.WORKER_START_SECONDS``)
    worker_start_seconds: float | None = None
    load_seconds_per_node: float | None = None
    # per op with probes in two regimes: (seconds per multiply-add, seconds per weight value), ``rate_fit.op_costs``
    op_costs: dict[str, tuple[float, float]] = field(default_factory=dict)

    def decode_cost(self, storage: str) -> float:
        """Seconds per weight value read and decoded to float32 inside a DecodedWeight op."""
        return self.decode_seconds.get(storage, 0.0)

    def with_read(self, rate: float | None) -> Throughput:
        return replace(self, read_bytes=rate)

    def macs_rate(self, signature: Signature | None, kind: str) -> float:
        """The probed rate of ``signature``, else its op's rate at its weight reuse (``op_costs``), else
        the average of probed signatures of its op (a GroupNorm conv is not timed like a Winograd conv),
        else of its kind."""
        if signature is not None and signature in self.signature_macs:
            return self.signature_macs[signature]
        reuse = weight_reuse(signature) if signature is not None else 0
        if signature is not None and signature.op in self.op_costs and reuse:
            per_mac, per_weight = self.op_costs[signature.op]
            return 1.0 / (per_mac + per_weight / reuse)
        if signature is not None and signature.op in self.op_macs:
            return self.op_macs[signature.op]
        return self.kind_macs.get(kind) or self.gemm_macs

    def probed_like(self, signature: Signature) -> bool:
        """Whether ``signature``'s rate comes from probes of its own op (so from probes that run the
        same fused element-wise work, see ``Signature.fuses_elementwise``)."""
        return signature in self.signature_macs or signature.op in self.op_macs

    def within(self, steps: Iterable) -> Throughput:
        """These rates for one component's ``steps``: a signature not probed runs at the average of
        the probed signatures of its kind in this component (weighted by their multiply-adds here),
        else at its kind's overall average. Components differ: a text encoder's 77-row GEMMs run at a
        third of the rate of a UNet's 256-row ones, and SDXL's UNet GEMMs, not probed in a short
        measurement, were projected 10x too slow at the text encoders' average."""
        weights: dict[Signature, float] = {}
        for step in steps:
            if step.signature in self.signature_macs:
                weights[step.signature] = weights.get(step.signature, 0.0) + sum(step.engine_macs)
        if not weights:
            return self
        probed = {s: self.signature_macs[s] for s in weights}
        local = kind_averages(probed, weights, self.kind_macs)
        return replace(self, kind_macs=local, op_macs=op_averages(probed, weights),
                       op_costs=op_costs(probed, weights))


def element_probe(rng: np.random.Generator, tokens: int = 1024) -> tuple[onnx.ModelProto, dict]:
    """The memory-bound ops of a UNet resnet block (GroupNorm as exported, SiLU, residual Add) on
    320 × 64 × 64 (SD 1.5's size at 512 × 512) and of a transformer block (LayerNorm, GELU as
    exported, residual Adds) on 1024 × 1280 (SD 1.5's width), on four separate inputs so that, as in a
    model, the ops read tensors written long before rather than the last result. Every tensor is
    5.2 MB, ten times a Pi Zero 2's 512 KB L2 and more than an x86 core's L2, so the rate is memory
    traffic. Not SD 1.5's 4096 tokens: at 21 MB a tensor the probe held 110 MiB beside the render
    worker (the step-choice child's peak, OOM-killed in the Pi twin) for the same rate (x86: 18-20
    GB/s per CPU second at either size; ``tokens``: 4096 for that comparison,
    ``benchmarks/step_choice_memory.py``)."""
    c, size, width = 320, 64, 1280
    weights = {"g_shape": np.array([1, 32, -1], np.int64), "x_shape": np.array([1, c, size, size], np.int64),
               "ones": np.ones(32, np.float32), "zeros": np.zeros(32, np.float32),
               "gamma": np.ones((c, 1, 1), np.float32), "beta": np.zeros((c, 1, 1), np.float32),
               "ln_scale": np.ones(width, np.float32), "ln_bias": np.zeros(width, np.float32),
               "sqrt2": np.array(2 ** 0.5, np.float32), "one": np.array(1.0, np.float32),
               "half": np.array(0.5, np.float32)}
    nodes = [helper.make_node("Reshape", ["x", "g_shape"], ["g"]),
             helper.make_node("InstanceNormalization", ["g", "ones", "zeros"], ["n"]),
             helper.make_node("Reshape", ["n", "x_shape"], ["r"]),
             helper.make_node("Mul", ["r", "gamma"], ["m"]),
             helper.make_node("Add", ["m", "beta"], ["a"]),
             helper.make_node("Sigmoid", ["a"], ["sg"]),
             helper.make_node("Mul", ["a", "sg"], ["silu"]),
             helper.make_node("Add", ["silu", "x"], ["res"]),
             helper.make_node("LayerNormalization", ["t", "ln_scale", "ln_bias"], ["ln"], axis=-1),
             helper.make_node("Div", ["ln", "sqrt2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]),
             helper.make_node("Mul", ["ln", "e1"], ["gl"]),
             helper.make_node("Mul", ["gl", "half"], ["gelu"]),
             helper.make_node("Mul", ["gelu", "u"], ["gated"]),
             helper.make_node("Add", ["gated", "v"], ["skip"]),
             helper.make_node("Add", ["skip", "t"], ["t2"]),
             helper.make_node("ReduceMean", ["t2"], ["tm"], keepdims=1),
             helper.make_node("Add", ["res", "tm"], ["y"])]
    shapes = {"x": (1, c, size, size), "t": (1, tokens, width), "u": (1, tokens, width), "v": (1, tokens, width)}
    feeds = {k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()}
    return probe_model(nodes, shapes, "y", weights), feeds


def step_probe(count: int, rng: np.random.Generator) -> tuple[onnx.ModelProto, dict, int]:
    nodes = [helper.make_node("Add", ["x" if i == 0 else f"v{i - 1}", "one"], [f"v{i}" if i < count - 1 else "y"])
             for i in range(count)]
    feeds = {"x": rng.standard_normal((4, 4)).astype(np.float32)}
    return probe_model(nodes, {"x": (4, 4)}, "y", {"one": np.ones((4, 4), np.float32)}), feeds, count


def _time_runs(run: Callable[[], object], min_seconds: float, min_runs: int = 2) -> tuple[float, float]:
    """Median (wall, cpu) seconds of one run, repeated until both limits are met (at most 20 runs)."""
    walls, cpus = [], []
    started = time.perf_counter()
    while len(walls) < min_runs or (time.perf_counter() - started < min_seconds and len(walls) < 20):
        w0, c0 = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


class _Bench:
    """Saves, loads and times probe models in one temporary folder."""

    def __init__(self, folder: Path, min_seconds: float) -> None:
        self.folder, self.min_seconds = folder, min_seconds
        self.count = 0
        self.wall = self.cpu = 0.0

    def time(self, proto: onnx.ModelProto, feeds: dict) -> tuple[float, float, str]:
        self.count += 1
        path = self.folder / f"probe{self.count}.onnx"
        onnx.save(proto, str(path))
        with _quiet("frame.engine"):
            model = load_model(str(path), weights="ram")
        try:
            model.run(feeds)  # warm-up: weights cached, BLAS threads started
            wall, cpu = _time_runs(lambda: model.run(feeds), self.min_seconds)
        finally:
            model.close()
        self.wall += wall
        self.cpu += cpu
        return wall, cpu, str(path)


@contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Probes are not the owner's models: keep the engine's "loaded ..." lines out of the log."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def _probe_work(path: str, feeds: dict) -> tuple[int, int, int]:
    """(engine multiply-adds, memory traffic, weight values decoded) of a probe, counted exactly as
    a model's steps are."""

    count = count_graph(path, {k: v.shape for k, v in feeds.items()})
    return sum(sum(s.engine_macs) for s in count.steps), count.element_bytes, count.decoded_elements


def _decode_costs(bench: _Bench, storages: Iterable[str], pick: int, rng: np.random.Generator) -> dict[str, float]:
    """Seconds per decoded weight value for each stored precision the model uses (``decode_probe``)."""
    costs = {}
    for storage in sorted(set(storages) - {"fp32"}):
        proto, feeds = decode_probe(storage, rng)
        timing = bench.time(proto, feeds)
        costs[storage] = timing[pick] / max(_probe_work(timing[2], feeds)[2], 1)
    return costs


def _compute_seconds(seconds: float, decoded: int, cost: float) -> float:
    """A probe's seconds less its weight decoding (counted apart, ``timing.step_compute``); at least a
    quarter of them, so a noisy decode figure cannot make a rate absurd."""
    return max(seconds - decoded * cost, 0.25 * seconds, 1e-9)


def _per_run(weighted: Iterable[tuple[Iterable, float]]) -> list[dict[Signature, float]]:
    runs = []
    for steps, evaluations in weighted:
        in_run: dict[Signature, float] = {}
        for step in steps:
            if step.signature is not None:
                in_run[step.signature] = in_run.get(step.signature, 0.0) + sum(step.engine_macs) * evaluations
        runs.append(in_run)
    return runs


def component_leaders(weighted: Iterable[tuple[Iterable, float]]) -> set[Signature]:
    """The heaviest signature of each op in each ``(steps, evaluations)`` run: the probes that give
    every component's ops a rate of their own (``Throughput.within``), so a text encoder that the
    prompt choice runs 93 times does not leave the UNet's GEMMs at the text encoder's rate, and the
    UNet's plain projections are not timed like its fused feed-forward (nor its GroupNorm convs like
    its Winograd ones). With it, the op's most weight-bound signature (``weight_bound_leader``)."""
    leaders: set[Signature] = set()
    for in_run in _per_run(weighted):
        for op in {signature.op for signature in in_run}:
            of_op = {s: macs for s, macs in in_run.items() if s.op == op}
            heaviest = max(of_op, key=of_op.__getitem__)
            leaders.add(heaviest)
            bound = weight_bound_leader(of_op)
            if bound is not None and weight_reuse(bound) * WEIGHT_BOUND_REUSE_RATIO <= weight_reuse(heaviest):
                leaders.add(bound)
    return leaders


def weight_bound_leader(of_op: dict[Signature, float]) -> Signature | None:
    """Of one op's signatures in a run (with their multiply-adds), the one that reuses each weight value
    least (``weight_reuse``) among those with at least ``WEIGHT_BOUND_MIN_SHARE`` of the op's work.

    Why: a conv on few pixels spends its time on the weight (decoding, Winograd's transform of it,
    streaming it through the cache), not on its multiply-adds. The SD 1.5 UNet's 1280-channel
    NormConvs at 8x8 ran 2.9x longer than the rate of its probed 64x64 one, those at 16x16 2.0x:
    an fp16 2-step render's UNet 28 % longer than estimated (docs/estimate.md). With both ends
    probed, ``rate_fit.op_costs`` prices the signatures between them by their reuse."""
    total = sum(of_op.values())
    candidates = [s for s, macs in of_op.items() if weight_reuse(s) and macs >= WEIGHT_BOUND_MIN_SHARE * total]
    return min(candidates, key=lambda s: (weight_reuse(s), -of_op[s])) if candidates else None


def heaviest_signatures(weighted: Iterable[tuple[Iterable, float]]) -> list[tuple[Signature, float]]:
    """(signature, multiply-adds per night) over ``(steps, evaluations)`` pairs (one per component run)
    in probing order: the ``component_leaders`` first, then the rest, each part heaviest first."""
    weighted = list(weighted)
    totals: dict[Signature, float] = {}
    for in_run in _per_run(weighted):
        for signature, macs in in_run.items():
            totals[signature] = totals.get(signature, 0.0) + macs
    leading = component_leaders(weighted)
    ranked = sorted(totals.items(), key=lambda item: -item[1])
    return [item for item in ranked if item[0] in leading] + [item for item in ranked if item[0] not in leading]


def measure_throughput(signatures: list[tuple[Signature, float]] = (), budget_seconds: float = 4.0,
                       cpu: bool = False, min_seconds: float = 0.2, seed: int = 0,
                       required: Collection[Signature] = ()) -> Throughput:
    """Measure the fixed probes and the heaviest ``signatures`` (see the module docstring); past
    ``budget_seconds`` only the ``required`` ones (``component_leaders``): on a loaded machine the
    fixed probes alone can spend a short budget, and one generic GEMM rate is off by a factor of two
    either way."""
    rng = np.random.default_rng(seed)
    pick = 1 if cpu else 0
    started = time.perf_counter()
    min_seconds = min(min_seconds, budget_seconds / 10) if budget_seconds > 0 else min_seconds
    with tempfile.TemporaryDirectory(prefix="frame-estimate-") as tmp:
        bench = _Bench(Path(tmp), min_seconds)
        gemm = bench.time(*matmul_probe(GEMM_SIGNATURE, 1 << 40, rng))
        gemm_rate = _probe_work(gemm[2], {"x": np.zeros((1, 256, 1280), np.float32)})[0] / gemm[pick]
        proto, feeds = element_probe(rng)
        timing = bench.time(proto, feeds)
        stream_rate = _probe_work(timing[2], feeds)[1] / timing[pick]
        proto, feeds, count = step_probe(200, rng)
        step_seconds = bench.time(proto, feeds)[pick] / count
        decode = _decode_costs(bench, [s.storage for s, _ in signatures], pick, rng)
        rates: dict[Signature, float] = {}
        for signature, _ in signatures:
            if time.perf_counter() - started >= budget_seconds and signature not in required:
                continue
            proto, feeds = build_probe(signature, PROBE_MACS, rng)
            timing = bench.time(proto, feeds)
            macs, _, decoded = _probe_work(timing[2], feeds)
            rates[signature] = macs / _compute_seconds(timing[pick], decoded, decode.get(signature.storage, 0.0))
    kinds = kind_averages(rates, dict(signatures), gemm_rate)
    return Throughput(gemm_rate, stream_rate, step_seconds, kinds, rates, None,
                      bench.cpu / max(bench.wall, 1e-9), time.perf_counter() - started,
                      "this machine (per CPU second)" if cpu else "this machine",
                      op_averages(rates, dict(signatures)), op_costs=op_costs(rates, dict(signatures)),
                      decode_seconds=decode)


def read_rate(location: str, max_bytes: int = 64 << 20, max_seconds: float = 2.0,
              http: HttpSettings | None = None) -> float | None:
    """Bytes per second reading ``location`` (a local file or an http(s) URL) sequentially.

    Local files are read with plain ``pread`` (a file already in the page cache reads at memory
    speed, as it will during the night if it stays cached); URLs with one Range request.
    """
    if location.startswith(("http://", "https://")):
        return _url_rate(location, max_bytes, max_seconds, http or HttpSettings())
    try:
        size = os.path.getsize(location)
        fd = os.open(location, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunk, done = 4 << 20, 0
        offset = size // 3 if size > 3 * max_bytes else 0
        started = time.perf_counter()
        while done < min(max_bytes, size - offset) and time.perf_counter() - started < max_seconds:
            data = os.pread(fd, chunk, offset + done)
            if not data:
                break
            done += len(data)
        seconds = time.perf_counter() - started
    finally:
        os.close(fd)
    return done / seconds if done and seconds > 0 else None


def _url_rate(url: str, max_bytes: int, max_seconds: float, http: HttpSettings) -> float | None:
    """One Range request, with ``http``'s token for the model's origin (a
    ``user:password@`` in the URL is sent as basic auth by requests)."""
    import requests

    headers = {"Range": f"bytes=0-{max_bytes - 1}", **http.headers_for(url)}
    try:
        started = time.perf_counter()
        with requests.get(url, headers=headers, stream=True, timeout=5) as response:
            if response.status_code not in (200, 206):
                return None
            done = 0
            for block in response.iter_content(1 << 16):
                done += len(block)
                if done >= max_bytes or time.perf_counter() - started > max_seconds:
                    break
        seconds = time.perf_counter() - started
    except requests.RequestException:
        return None
    return done / seconds if done and seconds > 0 else None
