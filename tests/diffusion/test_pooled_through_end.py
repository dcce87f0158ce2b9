"""The picker's pooled embeddings run only the positions through end-of-text (causal CLIP encoders):
the same vectors as the padded 77 up to float32 rounding, on SD 1.5 and SDXL (projected) exports."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from frame.diffusion import conditioning, load_pipeline

PIPELINES = Path(__file__).resolve().parents[1] / "fixtures" / "pipelines"
TEXTS = ["a stormy sea, oil painting", "a lighthouse", "", "a " + "very " * 80 + "long prompt"]


@pytest.mark.parametrize("kind", ["sd15", "sdxl"])
def test_vectors_equal_the_padded_run(kind, monkeypatch):
    pipe = load_pipeline(PIPELINES / kind / "model")
    short = pipe.embed_text(TEXTS)
    fed = []
    original = conditioning.through_end_of_text
    monkeypatch.setattr(conditioning, "through_end_of_text", lambda m, ids, eos: fed.append(len(ids)) or ids)
    padded = pipe.embed_text(TEXTS)
    assert fed == [77] * len(TEXTS)
    np.testing.assert_allclose(short, padded, rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(conditioning, "through_end_of_text", lambda m, ids, eos: fed.append(len(original(m, ids, eos)))
                        or original(m, ids, eos))
    fed.clear()
    pipe.embed_text(TEXTS)
    assert fed[0] < 20 and fed[2] == 2 and fed[3] == 77  # BOS + EOS for ""; a long prompt keeps all 77


def test_an_export_with_a_fixed_sequence_length_gets_all_77():
    ids = [49406, 320, 49407] + [49407] * 74
    fixed = SimpleNamespace(inputs=[SimpleNamespace(name="input_ids", shape=(1, 77))])
    dynamic = SimpleNamespace(inputs=[SimpleNamespace(name="input_ids", shape=("batch", "sequence"))])
    assert conditioning.through_end_of_text(fixed, ids, 49407) == ids
    assert conditioning.through_end_of_text(dynamic, ids, 49407) == ids[:3]
