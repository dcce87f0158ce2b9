"""Every compute step of a real-architecture model has a signature, and its probe runs that same step.

The throughput of a step is measured on a probe built from its signature (``frame.estimate.probes``):
if the probe runs another kernel than the model (no GroupNorm fused into the conv, Resize and Conv
left apart, a Winograd conv for a fused upsampling one), the estimate times the model at the wrong
rate: the full-size SD 1.5 render took 1.45x (UNet) and 1.4x (VAE) the CPU time its estimate said.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from frame.convert.files import Options, convert
from frame.estimate.counting import count_graph
from frame.estimate.probes import build_probe

MODEL = Path(__file__).resolve().parents[1] / "fixtures" / "pipelines" / "sd15" / "model"
UNET = {"sample": (1, 4, 16, 16), "timestep": (1,), "encoder_hidden_states": (1, 77, 32)}
VAE = {"latent_sample": (1, 4, 16, 16)}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """The tiny SD 1.5 UNet and VAE decoder as exported (fp32) and converted to fp16 and uint8."""
    found = {"fp32": MODEL}
    for weights in ("fp16", "uint8"):
        folder = tmp_path_factory.mktemp("converted") / weights
        convert(MODEL, folder, Options(weights))
        found[weights] = folder
    return found


def _unet_shapes(folder: Path) -> dict:
    structure = onnx.load(str(folder / "unet" / "model.onnx"), load_external_data=False)
    context = next(v for v in structure.graph.input if v.name == "encoder_hidden_states")
    width = context.type.tensor_type.shape.dim[2].dim_value or UNET["encoder_hidden_states"][2]
    return {**UNET, "encoder_hidden_states": (1, 77, width)}


@pytest.mark.parametrize("weights", ["fp32", "fp16", "uint8"])
@pytest.mark.parametrize("component", ["unet", "vae_decoder"])
def test_every_compute_step_has_a_signature_whose_probe_runs_the_same_kernel(models, weights, component,
                                                                              tmp_path):
    folder = models[weights]
    shapes = _unet_shapes(folder) if component == "unet" else VAE
    count = count_graph(str(folder / component / "model.onnx"), shapes)
    compute = [s for s in count.steps if any(s.engine_macs)]
    assert compute and all(s.signature is not None for s in compute), \
        sorted({s.op_type for s in compute if s.signature is None})
    signatures = list(dict.fromkeys(s.signature for s in compute))
    if component == "unet":  # the fused kernels the SD UNet spends its time in are all here
        assert {"norm_conv", "geglu", "upsample_conv", "conv", "matmul", "attention"} <= {s.op for s in signatures}
    for k, signature in enumerate(signatures):
        proto, feeds = build_probe(signature, 1 << 20, np.random.default_rng(0))
        path = str(tmp_path / f"probe{k}.onnx")
        onnx.save(proto, path)
        probed = [s.signature for s in count_graph(path, {n: v.shape for n, v in feeds.items()}).steps
                  if s.signature is not None and s.signature.op == signature.op]
        assert len(probed) == 1, (signature, probed)  # (a GEGLU probe may run a tiny MatMul first)
        got = probed[0]
        assert (got.op, got.storage, got.attrs) == (signature.op, signature.storage, signature.attrs)
        if signature.kind != "attention":  # the weights as in the model (attention probes cut heads)
            assert got.shapes[1:] == signature.shapes[1:]


@pytest.mark.parametrize("channels, size, rows", [(512, 64, 64), (512, 128, 32)])
def test_a_winograd_conv_probe_keeps_one_band_of_its_layout(channels, size, rows):
    """The probe of a 3x3 conv keeps one whole band of the Winograd layout the engine runs the full conv
    with (512 channels at 64x64: chunks over the whole image; at 128x128: chunks within 8-tile-row bands
    of F(4x4)), so its weight transform is spread over as many tiles as in the model (22 and 13 rows
    before: the transform's share made F(4x4) look barely faster than F(2x2)); same tile size."""
    from frame.engine.ops.conv import winograd_layout
    from frame.estimate.signature import Signature

    sig = Signature("norm_conv", ((1, channels, size, size), (channels, channels, 3, 3)),
                    (("pads", (1, 1, 1, 1)), ("strides", (1, 1))))
    model, feeds = build_probe(sig, 300_000_000, np.random.default_rng(0))
    probe_rows = next(iter(feeds.values())).shape[2]
    assert probe_rows == rows
    full, probe = (winograd_layout(channels, channels, (h, size), 1) for h in (size, probe_rows))
    assert full.tile == probe.tile == 4 and probe.tile_rows == full.tile_rows
