"""What frame costs on a Pi: download, disk, and the daemon's and worker's import time and memory.

    .venv/bin/python benchmarks/pi_footprint.py [--runs 5] [--wheels DIR]

1. Download: the aarch64 CPython 3.11 wheels pinned in requirements-pi.txt (tools/pi_wheels.py
   download), summed, and per dependency group: the packages that are there only because of
   matplotlib, and scikit-learn's own (scipy, joblib, threadpoolctl).
2. Disk: those wheels installed with pip (``--target``, the Pi's platform, .pyc compiled as pip does
   on the Pi) plus an empty venv with pip, measured with ``du`` (4 KiB blocks, as on the SD card's ext4).
3. Imports, on *this* machine (x86-64), in a virtualenv holding exactly the lock's packages (the same
   versions for this platform: a development venv has extras such as pandas, which scikit-learn
   imports when it finds it): each process's import set in a fresh interpreter, median of
   ``--runs``: wall and CPU seconds, and peak RSS as its own ``VmHWM`` from /proc/self/status (split
   into anonymous memory and file-backed pages, which the kernel can drop under pressure). The
   daemon's is what ``frame run`` imports; the worker's is what a night's render imports (engine,
   pipeline); the taste child's is the taste model (scikit-learn, scipy) and the explanation plot
   (matplotlib), which the worker loaded itself before they moved to the child ("before:" lines).

The numbers are written to docs/benchmarks-pi.md's "Footprint on the Pi" by hand.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import pi_wheels  # noqa: E402

SKLEARN_OWN = ("scikit-learn", "scipy", "joblib", "threadpoolctl")
RENDER = ["frame.worker.process", "frame.worker.render", "frame.worker.choose", "frame.worker.tastechild",
          "frame.taste.picker", "frame.diffusion.pipeline", "frame.engine", "onnx", "PIL.Image"]
TASTE = ["frame.taste.classifier"]  # sklearn (and scipy through it)
PLOT = ["frame.taste.plots", "matplotlib.figure", "matplotlib.backends.backend_agg"]
CHILD = ["frame.worker.tastechild", "frame.worker.choose", "frame.config", "frame.taste.picker"]
IMPORTS = {
    "python alone": [],
    "numpy alone": ["numpy"],
    "daemon (frame run)": ["frame.cli.program", "frame.cli.daemon", "frame.daemon.service"],
    "worker, every night (variety choice or none)": RENDER,
    "taste child: model (scikit-learn, scipy)": CHILD + TASTE,
    "taste child: model + plot (matplotlib)": CHILD + TASTE + PLOT,
    "scikit-learn + scipy alone (as the model)": ["numpy", "sklearn.base", "sklearn.utils.multiclass",
                                                  "sklearn.utils.validation"],
    "matplotlib alone (as the plot)": ["numpy", "matplotlib.figure", "matplotlib.backends.backend_agg"],
    "before: worker with model in-process": RENDER + TASTE,
    "before: worker with model + plot": RENDER + TASTE + PLOT,
}
PROBE = """
import importlib, json, sys, time
wall, cpu = time.perf_counter(), time.process_time()
for name in sys.argv[1:]:
    importlib.import_module(name)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
status = {l.split(":")[0]: int(l.split()[1]) for l in open("/proc/self/status") if l.split(":")[0] in
          ("VmHWM", "RssAnon", "RssFile")}
print(json.dumps({"wall": wall, "cpu": cpu, "hwm_kib": status["VmHWM"], "anon_kib": status["RssAnon"],
                  "file_kib": status["RssFile"]}))
"""


def du_kib(path: Path) -> int:
    return int(subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def download(dest: Path) -> list[Path]:
    if not list(dest.glob("*.whl")):
        assert pi_wheels.main(["download", str(dest)]) == 0
    return sorted(dest.glob("*.whl"))


def installed(wheels: list[Path], target: Path) -> dict[str, int]:
    """Install the wheels for the Pi into ``target``; KiB on disk per distribution (RECORD files + .pyc)."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
               "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
               *(a for p in pi_wheels.PLATFORMS for a in ("--platform", p)), *map(str, wheels)]
    subprocess.run(command, check=True)
    sizes = {}
    for info in target.glob("*.dist-info"):
        name = pi_wheels.wheel_name_version(Path(info.name.replace(".dist-info", "-x-py3-none-any.whl")))[0]
        files = {(target / line.split(",")[0]).resolve() for line in (info / "RECORD").read_text().splitlines()}
        files |= {p.resolve() for f in list(files) if f.suffix == ".py"
                  for p in (f.parent / "__pycache__").glob(f.stem + ".*.pyc")}
        sizes[name] = sum(-(-f.stat().st_size // 4096) * 4 for f in files if f.is_file())
    return sizes


def pi_like_venv(venv: Path) -> Path:
    """A venv on this machine with the lock's CPython 3.11 pins (this platform's wheels); its python."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pins, _ = pi_wheels.locked("3.11")
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:", *pins],
                       check=True)
    return python


def measure_imports(python: Path, modules: list[str], runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):  # frame itself comes from the checkout (cwd)
        done = subprocess.run([str(python), "-c", PROBE, *modules], capture_output=True, text=True, check=True,
                              cwd=ROOT)
        samples.append(json.loads(done.stdout))
    return {key: statistics.median(s[key] for s in samples) for key in samples[0]}


def disk(wheel_dir: Path, tmp: Path) -> None:
    """Print the download and installed sizes of the locked Pi wheels."""
    wheels = download(wheel_dir)
    matplotlib_only = pi_wheels.locked("3.11")[1]
    by_name = {pi_wheels.wheel_name_version(w)[0]: w.stat().st_size for w in wheels}
    mib = 1024 * 1024
    print(f"download: {len(wheels)} wheels, {sum(by_name.values()) / mib:.1f} MiB")
    for label, group in (("matplotlib only", matplotlib_only), ("scikit-learn + scipy", SKLEARN_OWN)):
        print(f"  {label}: {sum(by_name.get(n, 0) for n in group) / mib:.1f} MiB")
    for name, size in sorted(by_name.items(), key=lambda kv: -kv[1])[:8]:
        print(f"    {name:22s} {size / mib:6.1f} MiB")

    sizes = installed(wheels, Path(tmp) / "site")
    venv = Path(tmp) / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    base, packages = du_kib(venv), du_kib(Path(tmp) / "site")
    print(f"disk: venv {(base + packages) / 1024:.0f} MiB = empty venv with pip {base / 1024:.0f} MiB "
          f"+ packages {packages / 1024:.0f} MiB")
    for label, group in (("matplotlib only", matplotlib_only), ("scikit-learn + scipy", SKLEARN_OWN)):
        print(f"  {label}: {sum(sizes.get(n, 0) for n in group) / 1024:.0f} MiB")
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[:8]:
        print(f"    {name:22s} {size / 1024:6.0f} MiB")
    shutil.rmtree(Path(tmp) / "site")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--wheels", type=Path, help="reuse a folder of downloaded Pi wheels")
    parser.add_argument("--venv", type=Path, help="reuse (or keep) the venv with the lock's packages")
    parser.add_argument("--imports-only", action="store_true", help="skip the download and disk figures")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="frame-footprint-") as tmp:
        if not args.imports_only:
            disk(args.wheels or Path(tmp) / "wheels", Path(tmp))
        python = pi_like_venv(args.venv or Path(tmp) / "pi-like-venv")
        print(f"imports on this machine ({args.runs} runs, median)    wall s  CPU s  peak RSS MiB (anon + file)")
        for label, modules in IMPORTS.items():
            report(label, measure_imports(python, modules, args.runs))
    return 0


def report(label: str, r: dict[str, float]) -> None:
    print(f"  {label:44s} {r['wall']:5.2f}  {r['cpu']:5.2f}  {r['hwm_kib'] / 1024:6.1f} "
          f"({r['anon_kib'] / 1024:.1f} + {r['file_kib'] / 1024:.1f})")


if __name__ == "__main__":
    sys.exit(main())
