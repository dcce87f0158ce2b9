"""GuidedUNet feeds and guidance arithmetic, with a recording stand-in for the engine model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from frame.diffusion.conditioning import Conditioning
from frame.diffusion.denoise import GuidedUNet, static_latent_size
from frame.errors import FrameError


@dataclass
class Spec:
    name: str
    dtype: np.dtype
    shape: tuple


class FakeUNet:
    """Returns, per batch row, the mean of that row's encoder_hidden_states (so passes are traceable)."""

    shares_weight_reads = False

    def __init__(self, specs: list[Spec]) -> None:
        self.inputs = specs
        self.feeds: list[dict] = []

    def run(self, feeds, progress=None):
        self.feeds.append(feeds)
        if progress:
            progress(1.0)
        means = feeds["encoder_hidden_states"].mean(axis=(1, 2))
        return {"out_sample": np.ones_like(feeds["sample"]) * means[:, None, None, None]}


def specs(timestep_shape=("steps",), timestep_dtype=np.float32, batch="batch", sdxl=False, extra=()):
    out = [Spec("sample", np.dtype(np.float32), (batch, 4, "h", "w")),
           Spec("timestep", np.dtype(timestep_dtype), timestep_shape),
           Spec("encoder_hidden_states", np.dtype(np.float32), (batch, 77, 8))]
    if sdxl:
        out += [Spec("text_embeds", np.dtype(np.float32), (batch, 4)),
                Spec("time_ids", np.dtype(np.float32), (batch, 6))]
    return out + list(extra)


COND = Conditioning(np.full((1, 77, 8), 2.0, np.float32), np.full((1, 4), 5.0, np.float32))
UNCOND = Conditioning(np.full((1, 77, 8), 0.5, np.float32), np.zeros((1, 4), np.float32))
LATENT = np.zeros((1, 4, 8, 12), np.float32)


class FakeSharedUNet(FakeUNet):
    """Also shares the weight reads of ``run_shared`` (several feeds in one pass), like the engine's Model."""

    shares_weight_reads = True

    def __init__(self, specs: list[Spec]) -> None:
        super().__init__(specs)
        self.shared_calls: list[int] = []

    def run_shared(self, feeds, progress=None):
        self.shared_calls.append(len(feeds))
        return [FakeUNet.run(self, f, progress) for f in feeds]


def test_guidance_mixes_uncond_and_cond_in_one_batch():
    model = FakeUNet(specs())
    unet = GuidedUNet(model, COND, UNCOND, 7.5, (96, 64), mode="batched")
    out = unet(LATENT, np.float32(999.0))
    assert unet.mode == "batched" and len(model.feeds) == 1 and model.feeds[0]["sample"].shape[0] == 2
    np.testing.assert_allclose(out, 0.5 + 7.5 * (2.0 - 0.5))


def test_shared_mode_runs_both_passes_in_one_shared_run():
    model = FakeSharedUNet(specs())
    unet = GuidedUNet(model, COND, UNCOND, 7.5, (96, 64))
    out = unet(LATENT, np.float32(999.0))
    assert unet.mode == "shared" and model.shared_calls == [2]
    assert [f["encoder_hidden_states"][0, 0, 0] for f in model.feeds] == [0.5, 2.0]  # uncond first
    np.testing.assert_allclose(out, 0.5 + 7.5 * (2.0 - 0.5))


def test_shared_mode_falls_back_to_sequential_when_the_model_does_not_share_reads():
    """onnxruntime's sessions (``OrtModel.shares_weight_reads`` False) run the passes one after the other."""
    model = FakeUNet(specs())
    unet = GuidedUNet(model, COND, UNCOND, 7.5, (96, 64), mode="shared")
    unet(LATENT, np.float32(999.0))
    assert unet.mode == "sequential" and [f["sample"].shape[0] for f in model.feeds] == [1, 1]


def test_unknown_mode_is_refused():
    with pytest.raises(FrameError, match="unknown guidance mode 'twice'"):
        GuidedUNet(FakeUNet(specs()), COND, UNCOND, 7.5, (96, 64), mode="twice")


def test_fixed_batch_of_one_runs_two_passes():
    model = FakeUNet(specs(batch=1))
    out = GuidedUNet(model, COND, UNCOND, 3.0, (96, 64))(LATENT, np.float32(10.0))
    assert [f["sample"].shape[0] for f in model.feeds] == [1, 1]
    np.testing.assert_allclose(out, 0.5 + 3.0 * 1.5)


def test_single_pass_without_guidance():
    model = FakeUNet(specs())
    out = GuidedUNet(model, COND, None, 0.0, (96, 64))(LATENT, np.float32(10.0))
    assert len(model.feeds) == 1 and model.feeds[0]["sample"].shape[0] == 1
    np.testing.assert_allclose(out, 2.0)


@pytest.mark.parametrize(
    ("shape", "dtype", "expected_shape", "expected_value"),
    [(("steps",), np.float32, (1,), 946.75), ((), np.float32, (), 946.75), ((2,), np.float32, (2,), 946.75),
     ((1,), np.int64, (1,), 946)],
)
def test_timestep_follows_the_declared_input(shape, dtype, expected_shape, expected_value):
    model = FakeUNet(specs(timestep_shape=shape, timestep_dtype=dtype))
    GuidedUNet(model, COND, UNCOND, 7.5, (96, 64))(LATENT, np.float32(946.75))
    timestep = model.feeds[0]["timestep"]
    assert timestep.shape == expected_shape and timestep.dtype == dtype
    assert np.all(timestep == expected_value)


def test_sdxl_time_ids_use_the_real_size_and_pooled_embeddings():
    model = FakeUNet(specs(sdxl=True))
    GuidedUNet(model, COND, UNCOND, 5.0, (96, 64), mode="batched")(LATENT, np.float32(999.0))
    feeds = model.feeds[0]
    np.testing.assert_array_equal(feeds["time_ids"], [[64, 96, 0, 0, 64, 96]] * 2)
    np.testing.assert_array_equal(feeds["text_embeds"], np.concatenate([UNCOND.pooled, COND.pooled]))


def test_sdxl_unet_needs_pooled_embeddings():
    with pytest.raises(FrameError, match="one text encoder"):
        GuidedUNet(FakeUNet(specs(sdxl=True)), Conditioning(COND.hidden), None, 0.0, (64, 64))


def test_lcm_guidance_embedding():
    extra = [Spec("timestep_cond", np.dtype(np.float32), ("batch", 256))]
    model = FakeUNet(specs(extra=extra))
    GuidedUNet(model, COND, None, 7.5, (64, 64))(LATENT, np.float32(999.0))
    embedding = model.feeds[0]["timestep_cond"]
    assert embedding.shape == (1, 256)
    # sin/cos of 6500 * 10000^(-k/127): first and last frequency
    np.testing.assert_allclose(embedding[0, [0, 127, 128, 255]],
                               [np.sin(6500.0), np.sin(0.65), np.cos(6500.0), np.cos(0.65)], rtol=1e-3, atol=1e-3)


def test_missing_inputs_and_static_size():
    with pytest.raises(FrameError, match="no 'timestep' input"):
        GuidedUNet(FakeUNet([s for s in specs() if s.name != "timestep"]), COND, None, 0.0, (64, 64))
    static = FakeUNet([Spec("sample", np.dtype(np.float32), (1, 4, 64, 64))])
    assert static_latent_size(static) == (64, 64)
    assert static_latent_size(FakeUNet(specs())) is None
