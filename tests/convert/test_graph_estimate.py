"""frame's estimate (the night's step count comes from it) reads a built UNet as it reads an exported
one: every compute step has a signature, and the probe built from it runs the same kernel on the same
weight shapes (tests/estimate/test_probes.py holds the exported models to this)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from frame.convert.files import Options, convert_proto
from frame.engine import load_model
from frame.estimate.counting import count_graph
from frame.estimate.probes import build_probe
from tests.convert.graph_cases import FIXTURES, load_case


@pytest.mark.parametrize("weights", ["fp32", "fp16", "uint8"])
def test_a_built_unets_steps_are_probed_as_they_run(weights, tmp_path: Path):
    case = load_case(FIXTURES / "unet_sd2")
    model = case.model() if weights == "fp32" else convert_proto(case.model(), Options(weights))
    path = tmp_path / "unet.onnx"
    onnx.save(model, path, save_as_external_data=True, location="unet.onnx_data", size_threshold=0)
    count = count_graph(str(path), {k: v.shape for k, v in case.feeds().items()})
    compute = [s for s in count.steps if any(s.engine_macs)]
    assert compute and all(s.signature is not None for s in compute), \
        sorted({s.op_type for s in compute if s.signature is None})
    signatures = list(dict.fromkeys(s.signature for s in compute))
    assert {"norm_conv", "geglu", "upsample_conv", "conv", "matmul", "attention"} <= {s.op for s in signatures}
    for k, signature in enumerate(signatures):
        proto, feeds = build_probe(signature, 1 << 20, np.random.default_rng(0))
        probe = str(tmp_path / f"probe{k}.onnx")
        onnx.save(proto, probe)
        probed = [s.signature for s in count_graph(probe, {n: v.shape for n, v in feeds.items()}).steps
                  if s.signature is not None and s.signature.op == signature.op]
        assert len(probed) == 1, (signature, probed)
        assert (probed[0].op, probed[0].storage, probed[0].attrs) == (signature.op, signature.storage,
                                                                     signature.attrs)
        if signature.kind != "attention":
            assert probed[0].shapes[1:] == signature.shapes[1:], signature
        if signature.op == "geglu":  # as MatMul reads them: x (…, C), W1 (C, 2I), W2 (I, C), and the probe runs
            x, w1, w2 = signature.shapes
            assert w1[0] == x[-1] and w2 == (w1[1] // 2, x[-1]), signature
            with load_model(probe) as model:
                model.run(feeds)
