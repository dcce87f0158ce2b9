"""Textual-inversion embeddings: A1111's files read without torch, prompt words expanded to their
vectors in the token table, and the tiny SD 1.5 and SDXL pipelines painting the picture diffusers'
own pipeline paints after ``load_textual_inversion`` (references: ``tools/build_ti_fixtures.py``)."""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from frame.diffusion import conditioning, load_pipeline
from frame.diffusion.embedding_cache import CachedEmbed, EmbeddingCache
from frame.diffusion.textual_inversion import PLACEHOLDER_ID, Embeddings, read_embedding
from frame.diffusion.tokenizer import ClipTokenizer
from frame.errors import UsageError
from tests.painting import paint

FIXTURES = Path(__file__).parents[1] / "fixtures"
TI = FIXTURES / "textual_inversion" / "sd15"
MODEL = FIXTURES / "pipelines" / "sd15" / "model"


def safetensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    header, body = {}, b""
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + body


def psnr(a, b) -> float:
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def test_a1111_pt_and_safetensors_files_are_read_without_torch():
    ink = read_embedding(TI / "embeddings" / "inkwash.pt")
    bad = read_embedding(TI / "embeddings" / "badhands.safetensors")
    assert (ink.name, ink.vectors, ink.tables[""].shape) == ("inkwash", 2, (2, 32))
    assert (bad.name, bad.vectors, bad.tables[""].dtype) == ("badhands", 1, np.float32)


def test_sdxl_files_have_a_table_per_encoder(tmp_path):
    path = tmp_path / "xlstyle.safetensors"
    path.write_bytes(safetensors_bytes({"clip_g": np.ones((2, 24)), "clip_l": np.zeros((2, 16))}))
    assert {k: v.shape for k, v in read_embedding(path).tables.items()} == {"clip_l": (2, 16), "clip_g": (2, 24)}


class Hostile:
    def __reduce__(self):
        return os.system, ("echo owned",)


@pytest.mark.parametrize(("name", "content", "words"), [
    ("evil.pt", "pickle", "posix.system"),
    ("old.pt", b"\x80\x02legacy torch format", "not a torch zip file"),
    ("two.safetensors", {"a": np.ones((1, 4)), "b": np.ones((1, 4))}, "keys: a, b"),
    ("nan.safetensors", {"emb_params": np.full((1, 4), np.nan)}, "NaN"),
    ("cut.safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00{}", "not a safetensors file"),
])
def test_bad_files_are_refused_with_the_reason(tmp_path, name, content, words):
    path = tmp_path / name
    if content == "pickle":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("evil/data.pkl", pickle.dumps({"string_to_param": {"*": Hostile()}}))
        path.write_bytes(buffer.getvalue())
    elif isinstance(content, dict):
        path.write_bytes(safetensors_bytes(content))
    else:
        path.write_bytes(content)
    with pytest.raises(UsageError, match=words):
        read_embedding(path)


@pytest.fixture
def tokenizer():
    return ClipTokenizer.from_folder(MODEL / "tokenizer")


def test_a_prompt_word_becomes_the_embeddings_vectors_with_its_emphasis(tokenizer):
    embeddings = Embeddings([TI / "embeddings"])
    plain = tokenizer.encode("a cat, ")
    tokens = embeddings.tokens(tokenizer, "a cat, (inkwash:1.5) badhands", "", 32, pytest.fail)
    start = 1 + len(plain)
    assert tokens.ids[start:start + 3] == [PLACEHOLDER_ID] * 3
    assert [p for p, _ in tokens.fixes] == [start, start + 2]
    assert np.array_equal(tokens.fixes[0][1], read_embedding(TI / "embeddings" / "inkwash.pt").tables[""])
    assert list(tokens.weights[start:start + 3]) == pytest.approx([1.5, 1.5, 1.0])
    assert tokens.ids[start + 3] == tokenizer.eos_id  # the end-of-text token, where CLIP pools
    assert embeddings.tokens(tokenizer, "ink wash", "", 32, pytest.fail).fixes == []  # another word


def test_a_file_that_does_not_fit_is_named_and_its_word_stays_a_word(tmp_path, tokenizer):
    shutil.copy(TI / "embeddings" / "inkwash.pt", tmp_path / "inkwash.pt")
    (tmp_path / "broken.safetensors").write_bytes(b"garbage")
    (tmp_path / "xlonly.safetensors").write_bytes(safetensors_bytes({"clip_l": np.ones((1, 768)),
                                                                      "clip_g": np.ones((1, 1280))}))
    warnings = []
    text = "inkwash broken xlonly"
    tokens = Embeddings([tmp_path]).tokens(tokenizer, text, "", 768, warnings.append)
    assert tokens.fixes == [] and tokens.ids[:6] == [tokenizer.bos_id, *tokenizer.encode(text)][:6]
    assert any("'inkwash'" in w and "32 wide" in w and "768" in w for w in warnings)
    assert any("'broken'" in w and "safetensors" in w for w in warnings)
    assert any("'xlonly'" in w and "SDXL embedding" in w for w in warnings)


@pytest.mark.parametrize("kind", ["sd15", "sdxl"])
def test_conditioning_and_picture_match_diffusers_load_textual_inversion(kind):
    """SD 1.5: an A1111 .pt (2 vectors) in the prompt, an emb_params safetensors in the negative; SDXL:
    a clip_l/clip_g file loaded into diffusers' two encoders. Noise from torch's CPU generator."""
    folder = FIXTURES / "textual_inversion" / kind
    ref = np.load(folder / "reference.npz")
    spec = json.loads(str(ref["settings"]))
    pipe = load_pipeline(FIXTURES / "pipelines" / kind / "model", noise="torch-cpu")
    args = (spec["prompt"], spec["negative_prompt"], spec["steps"], spec["guidance"], spec["sampler"], spec["seed"],
            spec["width"], spec["height"])
    without = paint(pipe, *args)
    pipe.embeddings.add_folder(folder / "embeddings")
    cond, uncond = conditioning.encode_prompts(pipe.encoders, pipe.load, pipe.info, spec["prompt"],
                                               spec["negative_prompt"], True, pytest.fail, pipe.embeddings)
    assert np.abs(cond.hidden - ref["prompt_embeds"]).max() < 1e-5
    assert np.abs(uncond.hidden - ref["negative_embeds"]).max() < 1e-5
    if kind == "sdxl":
        assert np.abs(cond.pooled - ref["pooled"]).max() < 1e-5
    theirs = np.clip(ref["image"][0] * 255, 0, 255)
    assert psnr(paint(pipe, *args), theirs) >= 40
    assert psnr(without, theirs) < 30  # the words alone do not paint it


def test_pooled_text_embeddings_use_the_vectors_and_the_cache_keys_on_the_file(tmp_path):
    pipe = load_pipeline(MODEL)
    before = pipe.embed_text(["a harbour, inkwash", "a harbour"])
    folder = tmp_path / "embeddings"
    folder.mkdir()
    shutil.copy(TI / "embeddings" / "inkwash.pt", folder / "inkwash.pt")
    pipe.embeddings.add_folder(folder)
    after = pipe.embed_text(["a harbour, inkwash", "a harbour"])
    assert not np.allclose(before[0], after[0]) and np.array_equal(before[1], after[1])
    cache = EmbeddingCache(tmp_path / "cache", "identity")
    first = CachedEmbed(cache, pipe.embed_text, pipe.embeddings.cache_key)
    assert np.array_equal(first(["a harbour, inkwash"])[0], after[0])
    (folder / "inkwash.pt").unlink()
    shutil.copy(TI / "embeddings" / "badhands.safetensors", folder / "inkwash.safetensors")  # same name, new file
    pipe.embeddings.add_folder(tmp_path / "none")  # rescans the folders
    again = CachedEmbed(cache, pipe.embed_text, pipe.embeddings.cache_key)
    vector = again(["a harbour, inkwash"])[0]
    assert again.computed == 1 and not np.array_equal(vector, after[0])


def test_an_export_without_a_reachable_token_table_paints_the_words_as_words():
    class NoTable:
        def __init__(self, model):
            self.model = model
            self.inputs, self.outputs = model.inputs, model.outputs

        def token_table(self, name):
            return None

        def run(self, feeds, **options):
            assert not options  # no overrides asked of it
            return self.model.run(feeds)

    pipe = load_pipeline(MODEL)
    real = pipe.load
    pipe.embeddings.add_folder(TI / "embeddings")
    warnings = []
    cond, _ = conditioning.encode_prompts(pipe.encoders, lambda source: NoTable(real(source)), pipe.info,
                                          "inkwash", None, False, warnings.append, pipe.embeddings)
    plain, _ = conditioning.encode_prompts(pipe.encoders, real, pipe.info, "inkwash", None, False, pytest.fail)
    assert np.array_equal(cond.hidden, plain.hidden)
    assert any("token-embedding table" in w for w in warnings)


def test_a_file_gone_too_big_or_unreadable_never_costs_the_night(tmp_path, tokenizer):
    """The prompt's cache key digests the embedding files it names: it read each file whole (a 4 GB
    checkpoint dropped into embeddings/ went into the worker's memory) and raised for a file removed
    since the folder was listed, which exited the render with 1."""
    shutil.copy(TI / "embeddings" / "inkwash.pt", tmp_path / "inkwash.pt")
    with open(tmp_path / "bigone.safetensors", "wb") as f:
        f.truncate(100 << 20)  # sparse: 100 MiB on paper
    embeddings = Embeddings([tmp_path])
    warnings = []
    tokens = embeddings.tokens(tokenizer, "bigone inkwash", "", 32, warnings.append)
    assert tokens.names == ["inkwash"]
    assert any("'bigone'" in w and "100 MiB is no embedding" in w for w in warnings), warnings
    key = embeddings.cache_key("bigone inkwash")
    assert f"bigone=size{100 << 20}-" in key
    (tmp_path / "inkwash.pt").unlink()
    assert "inkwash=missing" in embeddings.cache_key("bigone inkwash")


@pytest.mark.parametrize("error", [RecursionError("deep"), TypeError("unhashable"), MemoryError(), KeyError("x")])
def test_a_reader_tripped_by_a_hostile_file_costs_only_the_word(tmp_path, tokenizer, monkeypatch, error):
    """Issue 40 item 4: an embedding whose reader raised anything but UsageError failed the render, and
    a queued prompt naming it failed every night after."""
    from frame.diffusion import textual_inversion

    def trips(path):
        raise error

    (tmp_path / "hostile.pt").write_bytes(b"PK\x03\x04")
    monkeypatch.setattr(textual_inversion, "read_embedding", trips)
    warnings = []
    tokens = Embeddings([tmp_path]).tokens(tokenizer, "a hostile fox", "", 768, warnings.append)
    assert tokens.fixes == [] and tokens.ids[1:4] == tokenizer.encode("a hostile fox")[:3]
    assert warnings == [f"embedding 'hostile' is ignored: {tmp_path / 'hostile.pt'} is not an embedding frame can "
                        f"read ({type(error).__name__})"]
