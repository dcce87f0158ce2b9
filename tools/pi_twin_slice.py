"""The Pi twin's checks on arm64: the night's picture against x86, and a slice of the test suite.

Used by tools/pi_twin.py.

Same numbers on arm64. The night paints a queued prompt with a fixed seed, so its picture is
reproducible; tools/build_pi_twin_reference.py recorded the same night's picture on x86
(tests/fixtures/pi_twin/night-x86.png). numpy's OpenBLAS runs different kernels on the two machines
(AVX2/AVX-512 sgemm on x86, NEON on aarch64): they add the same products in a different order, so
float32 results differ in their last bits (~1e-7 relative). Through 8 denoising steps and the VAE that
moves a few 8-bit values by one level. The tolerance: every value within ``MAX_LEVELS`` (2) levels of
x86 and at most ``MAX_CHANGED`` (1 %) of the values different at all. A real arm64 bug (a wrong kernel,
a dtype, a byte order) changes far more than that; a picture that is merely noisy fails too.

The slice: the engine (including its parity tests against committed onnxruntime/torch fixtures), the
samplers (against diffusers fixtures), display preparation and the store. onnxruntime segfaults under
qemu-user and is not in requirements-pi.txt, so tests that compare against it live on x86 only; the
files below were chosen because they need no onnxruntime (``pytest.importorskip`` skips the rest).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pi_twin_install as install_mod
import pi_twin_memory as memory
import pi_twin_rootfs as rootfs_mod

REFERENCE = rootfs_mod.ROOT / "tests" / "fixtures" / "pi_twin" / "night-x86.png"
MAX_LEVELS = 2
MAX_CHANGED = 0.01
PYTEST_TARGET = "/opt/pi-twin-pytest"
SLICE = (
    # engine: parity with committed fixtures, memory plan, weights, passes
    "tests/engine/test_engine_fixtures.py", "tests/engine/test_blas_threads.py", "tests/engine/test_buffers.py",
    "tests/engine/test_memory.py", "tests/engine/test_passes.py", "tests/engine/test_shared_run.py",
    "tests/engine/test_subgraphs.py", "tests/engine/test_validation.py", "tests/engine/test_weight_decoding.py",
    "tests/engine/test_bad_input.py",
    # samplers and the pipeline against diffusers' numbers
    "tests/diffusion/test_samplers.py", "tests/diffusion/test_img2img_samplers.py",
    "tests/diffusion/test_sampler_registry.py", "tests/diffusion/test_equivalence.py",
    "tests/diffusion/test_denoise.py",
    # display preparation
    "tests/display/test_preparation.py", "tests/display/test_dither.py", "tests/display/test_dither_registry.py",
    "tests/display/test_colour.py", "tests/display/test_gamut.py", "tests/display/test_care.py",
    "tests/display/test_panels.py",
    # the store
    "tests/daemon/test_store.py",
)
# SDXL's equivalence cases cost two thirds of the slice's CPU; the twin's night is SD 1.5's architecture
SLICE_FILTER = "not sdxl"


@dataclass(frozen=True)
class Verdict:
    max_levels: int
    changed: int
    values: int
    shape_ok: bool

    @property
    def ok(self) -> bool:
        return self.shape_ok and self.max_levels <= MAX_LEVELS and self.changed <= MAX_CHANGED * self.values

    def describe(self) -> str:
        if not self.shape_ok:
            return "a different size from the x86 reference"
        return (f"{self.changed} of {self.values} values differ, by at most {self.max_levels} level(s) "
                f"(tolerance: <= {MAX_LEVELS} levels, <= {MAX_CHANGED:.0%} of values) -> "
                f"{'within' if self.ok else 'OUTSIDE'} tolerance")


def compare(ours, reference) -> Verdict:
    """Two uint8 pictures (numpy arrays), value by value."""
    import numpy as np

    if ours.shape != reference.shape:
        return Verdict(0, 0, int(reference.size), False)
    diff = np.abs(ours.astype(np.int16) - reference.astype(np.int16))
    return Verdict(int(diff.max()), int(np.count_nonzero(diff)), int(diff.size), True)


def compare_with_reference(png: bytes, reference: Path = REFERENCE) -> Verdict:
    import numpy as np
    from PIL import Image

    ours = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    return compare(ours, np.asarray(Image.open(reference).convert("RGB")))


def pytest_summary(output: str) -> str:
    """pytest's last line ("388 passed, 1 skipped in 160.2s"), without the ``=`` rules."""
    lines = [line.strip("= ") for line in output.strip().splitlines() if re.search(r"\b(passed|failed|error)", line)]
    return lines[-1] if lines else "no pytest summary (see the output above)"


def run_slice(rootfs: Path, cgroup: memory.Cgroup, timeout: float) -> tuple[bool, str, float]:
    """The slice under frame's venv python, from the repository copy, in ``cgroup``; returns
    (passed, pytest's summary, seconds)."""
    install_mod.install_pytest(rootfs, PYTEST_TARGET, 600)
    started = time.monotonic()
    env = install_mod.chroot_env(PYTHONPATH=PYTEST_TARGET, MPLBACKEND="Agg")
    command = ["chroot", str(rootfs), "env", "-i", "-C", rootfs_mod.REPO_IN_ROOTFS, *env[2:],
               "/opt/frame/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", SLICE_FILTER, *SLICE]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=lambda: cgroup.add(os.getpid()))
    output = done.stdout + done.stderr
    print(output[-5000:])
    return done.returncode == 0, pytest_summary(output), time.monotonic() - started
