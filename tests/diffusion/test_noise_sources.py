"""frame's three noise sources (``model.noise``): torch's CPU generator and A1111's NV source bit for bit,
frame's own unchanged, and a tiny pipeline painting diffusers' picture from a seed alone.

The recorded draws come from ``tools/build_noise_fixtures.py``; with torch installed the CPU generator is
also checked against torch itself on more seeds and shapes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from frame.diffusion import load_pipeline
from frame.diffusion.noise.philox import PhiloxNoise, philox4x32
from frame.diffusion.noise.sources import A1111_RNG, from_a1111, make_noise
from frame.diffusion.noise.torch_cpu import TorchCpuNoise, fma32
from frame.diffusion.samplers.base import NoiseSource
from frame.errors import UsageError
from tests.painting import paint

FIXTURES = Path(__file__).parents[1] / "fixtures"
SHAPES = ((1, 4, 8, 12), (1, 4, 8, 12), (1, 4, 9, 7), (3,), (5,), (1,), (2, 3), (16,), (17,), (1, 4, 8, 12))


def bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize(("name", "source"), [("torch_cpu", TorchCpuNoise), ("a1111_nv", PhiloxNoise)])
def test_draws_equal_the_recorded_ones_bit_for_bit(name, source):
    recorded = np.load(FIXTURES / "noise" / f"{name}.npz")
    for seed in recorded["seeds"]:
        noise = source(int(seed))
        for index, shape in enumerate(SHAPES):
            expected = recorded[f"s{seed}_d{index}"]
            got = noise.normal(shape)
            assert got.dtype == np.float32 and got.shape == expected.shape
            assert np.array_equal(bits(got), bits(expected)), (name, int(seed), index, shape)


def test_torch_cpu_equals_torch_on_more_seeds_and_shapes():
    torch = pytest.importorskip("torch")
    shapes = [(1, 4, 64, 64), (1, 4, 128, 96), (1, 4, 7, 9), (15,), (1, 4, 1, 1), (33,), (1, 4, 64, 64)]
    for seed in (1, 99, 31337, 2**31 + 5, 2**32 - 2):
        generator, noise = torch.Generator().manual_seed(seed), TorchCpuNoise(seed)
        for shape in shapes:
            assert np.array_equal(bits(noise.normal(shape)), bits(torch.randn(shape, generator=generator).numpy()))


def test_torch_cpu_state_round_trips_through_json_mid_stream():
    noise = TorchCpuNoise(5)
    noise.normal((1, 4, 8, 8))
    noise.normal((3,))  # leaves the second value of a double Box–Muller pair waiting
    state = json.loads(json.dumps(noise.get_state()))
    expected = [noise.normal((1,)), noise.normal((1, 4, 8, 8))]
    again = TorchCpuNoise(0)
    again.set_state(state)
    assert all(np.array_equal(bits(a), bits(b)) for a, b in zip([again.normal((1,)), again.normal((1, 4, 8, 8))],
                                                               expected))


def test_philox_state_round_trips_through_json():
    noise = PhiloxNoise(2**40 + 3)
    noise.normal((4, 4))
    again = PhiloxNoise(0)
    again.set_state(json.loads(json.dumps(noise.get_state())))
    assert np.array_equal(bits(again.normal((4, 4))), bits(noise.normal((4, 4))))


def test_philox_core_matches_random123_known_answers():
    """Philox4x32-10 known-answer vectors of the Random123 library (kat_vectors)."""
    cases = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for counter, key, expected in cases:
        out = philox4x32(np.array(counter, np.uint32).reshape(4, 1), np.array(key, np.uint32).reshape(2, 1))
        assert tuple(int(v) for v in out[:, 0]) == expected


def test_philox_seed_zero_gives_a1111s_documented_numbers():
    """modules/rng_philox.py's docstring: ``Generator(seed=0).randn(shape=(3, 4))`` (printed by torch on
    CUDA, hence the last digit; A1111's numpy gives these to 3e-7)."""
    documented = [[-0.92466259, -0.42534415, -2.6438457, 0.14518388],
                  [-0.12086647, -0.57972564, -0.62285122, -0.32838709],
                  [-1.07454231, -0.36314407, -1.67105067, 2.26550497]]
    assert np.allclose(PhiloxNoise(0).normal((3, 4)), documented, atol=3e-7, rtol=0)


def test_fma32_rounds_once():
    a = np.float32(1 + 2**-12)  # a * a = 1 + 2^-11 + 2^-24: exactly halfway between two float32
    low, high = np.float32(1 + 2**-11), np.float32(1 + 2**-11 + 2**-23)
    assert fma32(a, a, np.float32(0)) == low  # the tie goes to even
    assert fma32(a, a, np.float32(2**-70)) == high  # just above the tie: up, though float64 loses 2^-70
    assert fma32(a, a, np.float32(-(2**-70))) == low
    assert np.float32(a.astype(np.float64) * a + 2**-70) == low  # rounding twice gets it wrong


def test_frame_source_is_the_old_pcg64_stream():
    assert isinstance(make_noise("frame", 3), NoiseSource)
    expected = np.random.Generator(np.random.PCG64(3)).standard_normal((1, 4, 8, 8), dtype=np.float32)
    assert np.array_equal(make_noise("frame", 3).normal((1, 4, 8, 8)), expected)
    with pytest.raises(UsageError, match="unknown noise source 'cuda'.*torch-cpu"):
        make_noise("cuda", 3)


def test_a1111_names():
    assert A1111_RNG == {"torch-cpu": "CPU", "a1111-nv": "NV"}
    assert (from_a1111("CPU"), from_a1111("nv"), from_a1111("GPU"), from_a1111(None)) == ("torch-cpu", "a1111-nv",
                                                                                           None, None)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.mark.parametrize("kind", ["sd15", "sdxl"])
def test_seeded_render_matches_diffusers_without_latents(kind):
    ref = np.load(FIXTURES / "noise" / f"seeded_{kind}.npz")
    spec = json.loads(str(ref["settings"]))
    pipe = load_pipeline(FIXTURES / "pipelines" / kind / "model", noise="torch-cpu")
    image = paint(pipe, spec["prompt"], spec["negative_prompt"], spec["steps"], spec["guidance"], spec["sampler"],
                  spec["seed"], spec["width"], spec["height"])
    theirs = np.clip(ref["image"][0] * 255, 0, 255)
    assert psnr(np.asarray(image, np.float32), theirs) >= 40
    assert "RNG: CPU" in image.info["parameters"]
    frame_own = paint(pipe, spec["prompt"], spec["negative_prompt"], spec["steps"], spec["guidance"],
                      spec["sampler"], spec["seed"], spec["width"], spec["height"], noise="frame")
    assert psnr(np.asarray(frame_own, np.float32), theirs) < 30  # the source is what makes the match
    assert "RNG" not in frame_own.info["parameters"]
