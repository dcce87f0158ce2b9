"""The `choose` phase of a night with kept text embeddings, projected on a Pi Zero 2 W, and measured here.

`choose` embeds the taste picker's texts with the model's last text encoder, in shared passes of four.
Three ways to run a night, counted by ``frame.estimate`` (graph counts; the Pi from the count at
``frame.estimate.pi``'s constants alone, the same on any machine under any load; this machine's
figures from its measured CPU-time rates) on the
encoder given with ``--encoder`` (SDXL's OpenCLIP bigG ``text_encoder_2``, e.g. from
``tools/sdxl_full_export.py --only text_encoder_2`` then ``--convert uint8`` here):

* **first night**: every text (93 with the default 10 themes x 8 styles), 24 passes at all 77
  positions, as every night ran before the embeddings were kept;
* **first night, through end-of-text**: the default configuration's texts (axes' ends, themes x
  styles) at the positions through their end-of-text token, as a first night runs them now;
* **kept, padded**: a typical later night, only the 10 new feed texts (3 passes), at 77 positions;
* **kept, through end-of-text**: the same 10 texts at the positions through their end-of-text token
  (``frame.diffusion.conditioning.through_end_of_text``), in passes of four padded texts' positions
  (``texts_per_pass``: one pass for ten short texts), as frame runs them now.

``--memory`` measures one shared pass's own peak (VmHWM, in a child) for 4 padded texts and for the
short texts a pass takes now.

With ``--demo`` it also times the real choose of the bundled demo model (wall and CPU seconds, the
median of ``--runs``): a cold night (empty cache) against a warm one with ten new feed texts.

    python benchmarks/choose_new_texts.py --encoder /tmp/sdxl/uint8/text_encoder_2/model.onnx \
        --tokenizer /tmp/sdxl/fp32/tokenizer_2 --demo
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from frame.diffusion.conditioning import Encoder, pass_sizes, texts_per_pass, tokens_through_end  # noqa: E402
from frame.estimate import pi  # noqa: E402
from frame.estimate.choice import format_duration  # noqa: E402
from frame.estimate.counting import count_graph  # noqa: E402
from frame.estimate.machine import component_leaders, heaviest_signatures, measure_throughput, read_rate  # noqa: E402
from frame.estimate.night import project  # noqa: E402
from frame.estimate.plan import TOKENS, NightPlan, Run, concrete, declared_inputs  # noqa: E402

FIRST_NIGHT_TEXTS = 93  # 12 axis ends + 10 themes x 8 styles + 1 (docs/estimate.md)
FEED_TEXTS = (  # ten feed prompts as an owner's feeds bring them (the README's example feed style)
    "a lighthouse on a cliff at dusk, oil painting",
    "autumn forest after the rain, soft light",
    "a quiet harbour at dawn with fishing boats, watercolour",
    "snow on a mountain pass under a full moon",
    "a red fox in tall grass, morning mist",
    "an old tram in a narrow street, evening",
    "sunflowers in a blue vase on a wooden table",
    "a storm over the sea, dramatic clouds",
    "a reading room full of books, warm lamps",
    "a desert road at noon, long shadows",
)


def convert(src: Path, dst: Path, weights: str) -> None:
    from frame.convert.files import Options, convert_file

    dst.parent.mkdir(parents=True, exist_ok=True)
    convert_file(src, dst, Options(weights=weights))


def first_night_texts() -> list[str]:
    """A first night's texts with the default configuration (axes' ends, themes x styles), as the
    night's job lists them (``frame.estimate.new_texts.tonight_texts``)."""
    from frame.config import Config
    from frame.estimate.new_texts import tonight_texts

    texts = tonight_texts(Config())
    return list(dict.fromkeys(texts.axis_ends + texts.candidates + texts.rated))


def choose_run(source: str, texts: int, tokens: int):
    """The plan's choose run for ``texts`` texts at ``tokens`` positions (``frame.estimate.plan``)."""
    from frame.engine.model import read_structure

    structure = read_structure(source)
    shapes = {k: concrete(v, (1, tokens)) for k, v in declared_inputs(structure).items()}
    sizes = pass_sizes(texts, texts_per_pass(tokens))
    return Run("choose", "text_encoder_2", count_graph(source, shapes, structure=structure), len(sizes),
               items=sizes[0])


def projection(runs: dict[str, Run], measure_seconds: float, read_location: str) -> list[str]:
    weighted = [(r.count.steps, r.evaluations * r.items) for r in runs.values()]
    rates = measure_throughput(heaviest_signatures(weighted), budget_seconds=measure_seconds, cpu=True,
                               required=component_leaders(weighted)).with_read(read_rate(read_location))
    signatures = [s.signature for r in runs.values() for s in r.count.steps if s.signature is not None]
    machines = [("this machine (CPU time)", rates), (pi.LABEL, pi.pi_throughput(signatures))]  # Pi: count only
    out = []
    for name, run in runs.items():
        plan = NightPlan(name, "", 0, 0, 1, "euler_a", 0.0, False, "none", runs=[run])
        cells = []
        for label, machine in machines:
            seconds = project(plan, machine, "prefetch").phases["choose"]
            cells.append(f"{label} {format_duration(seconds)}")
        read = run.evaluations * run.count.weight_bytes
        out.append(f"{name}: {run.evaluations} passes of {run.items} at {run.count.input_shapes['input_ids'][1]} "
                   f"positions, {run.count.macs * run.items * run.evaluations / 1e9:.0f} G multiply-adds, "
                   f"{read / 1e9:.1f} GB read; " + "; ".join(cells))
    return out


def pass_peak(source: str, texts: int, positions: int) -> str:
    """One shared pass of ``texts`` texts of ``positions`` positions in a child: its own VmHWM."""
    import subprocess

    code = (
        "import sys, numpy as np; from frame.engine import load_model\n"
        f"m = load_model({source!r}); n, p = {texts}, {positions}\n"
        "ids = [[49406] + [320] * (p - 2) + [49407] + ([0] * (77 - p) if p < 77 else []) for _ in range(n)]\n"
        "ids = [i[:p] if p < 77 else i for i in ids]\n"
        "m.run_shared([{'input_ids': np.asarray([i], dtype=np.int32)} for i in ids])\n"
        "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return f"one pass of {texts} texts x {positions} positions: peak {int(out.stdout.split()[-1]) / 1024:.0f} MB"


def demo_nights(runs: int) -> list[str]:
    """The demo model's real choose, cold (everything embedded) against warm (ten new feed texts)."""
    import os

    from frame.config import Config
    from frame.diffusion.configured import load_configured_pipeline
    from frame.taste.features import DEFAULT_AXES
    from frame.worker.embeddings import NightEmbed

    themes = [f"theme {n}" for n in range(10)]
    styles = [f"style {n}" for n in range(8)]
    from frame.models import resolve_model_source

    pipe = load_configured_pipeline(Config(state_dir=tempfile.mkdtemp()), source=resolve_model_source("demo"))

    ends = [t for pair in DEFAULT_AXES.values() for t in pair]
    everything = ends + [f"{t}, {s}" for t in themes for s in styles] + list(FEED_TEXTS)
    cold, warm = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as state:
            for texts, times in ((everything, cold), (everything[:-10] + [t + "!" for t in FEED_TEXTS], warm)):
                embed = NightEmbed(lambda: pipe, Path(state))
                started, cpu = time.perf_counter(), os.times()
                embed(texts)
                done = os.times()
                times.append((time.perf_counter() - started, done.user + done.system - cpu.user - cpu.system,
                              len(embed.embedded)))
    lines = []
    for name, times in (("cold night", cold), ("warm night", warm)):
        wall = statistics.median(t[0] for t in times)
        cpu = statistics.median(t[1] for t in times)
        lines.append(f"demo model, {name}: {times[0][2]} texts embedded of {len(everything)}, "
                     f"{wall:.2f} s wall, {cpu:.2f} s CPU (median of {runs})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", type=Path, help="the text encoder's model.onnx (SDXL text_encoder_2)")
    parser.add_argument("--tokenizer", type=Path, help="its tokenizer folder (vocab.json, merges.txt)")
    parser.add_argument("--convert", choices=("fp16", "uint8"), help="convert --encoder first, beside it")
    parser.add_argument("--measure-seconds", type=float, default=8.0)
    parser.add_argument("--demo", action="store_true", help="also time the demo model's real choose")
    parser.add_argument("--memory", action="store_true", help="also measure one pass's peak (VmHWM) in a child")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.encoder:
        source = args.encoder
        if args.convert:
            source = args.encoder.parent.parent.parent / args.convert / args.encoder.parent.name / "model.onnx"
            if not source.is_file():
                convert(args.encoder, source, args.convert)
        tokens = tokens_through_end(Encoder("text_encoder_2", args.tokenizer, str(source), "!"), list(FEED_TEXTS))
        print(f"encoder {source}; the ten feed texts take at most {tokens} positions through end-of-text")
        first = first_night_texts()
        first_tokens = tokens_through_end(Encoder("text_encoder_2", args.tokenizer, str(source), "!"), first)
        print(f"a first night's {len(first)} default texts take at most {first_tokens} positions through end-of-text")
        runs = {"first night (every text)": choose_run(str(source), FIRST_NIGHT_TEXTS, TOKENS),
                "first night, through end-of-text": choose_run(str(source), len(first), first_tokens),
                "kept, padded to 77": choose_run(str(source), len(FEED_TEXTS), TOKENS),
                "kept, through end-of-text": choose_run(str(source), len(FEED_TEXTS), tokens)}
        for line in projection(runs, args.measure_seconds, str(source.parent / "model.onnx_data")):
            print(line)
        if args.memory:
            for texts, positions in ((4, 77), (10, tokens), (texts_per_pass(tokens), tokens)):
                print(pass_peak(str(source), texts, positions))
    if args.demo:
        for line in demo_nights(args.runs):
            print(line)


if __name__ == "__main__":
    main()
