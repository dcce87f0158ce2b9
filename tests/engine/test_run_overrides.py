"""``Model.run(overrides=...)`` and ``Model.token_table``: an intermediate tensor replaced as it is made
(how textual-inversion vectors enter a text encoder without a rewritten model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from frame.engine import load_model

ENCODER = Path(__file__).parents[1] / "fixtures" / "pipelines" / "sd15" / "model" / "text_encoder" / "model.onnx"


def test_token_table_finds_the_gather_of_input_ids_and_overrides_change_only_that_run():
    model = load_model(str(ENCODER))
    name, width = model.token_table("input_ids")
    assert width == 32 and "token_embedding" in name
    ids = np.array([[3512, 100, 200] + [3513] * 74], dtype=np.int32)
    plain = model.run({"input_ids": ids})["last_hidden_state"]
    assert np.allclose(plain, ort.InferenceSession(str(ENCODER)).run(["last_hidden_state"], {"input_ids": ids})[0],
                       atol=1e-5)
    seen = []

    def swap(value: np.ndarray) -> np.ndarray:
        seen.append(value.shape)
        out = value.copy()
        out[0, 2] = 0.5
        return out

    changed = model.run({"input_ids": ids}, overrides={name: swap})["last_hidden_state"]
    assert seen == [(1, 77, 32)]
    assert np.array_equal(changed[0, :2], plain[0, :2])  # causal: the tokens before it do not see it
    assert not np.allclose(changed[0, 2:], plain[0, 2:])
    assert np.array_equal(model.run({"input_ids": ids})["last_hidden_state"], plain)  # one run only
    assert model.token_table("attention_mask") is None
