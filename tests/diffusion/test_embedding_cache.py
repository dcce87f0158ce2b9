"""Kept text embeddings (frame.diffusion.embedding_cache, encoder_identity): bit-exact, checked on read,
capped by bytes in least-recently-used order, keyed by the encoder's content identity."""

import os
import shutil

import numpy as np
import pytest

from frame.diffusion import embedding_cache as ec
from frame.diffusion.configured import load_configured_pipeline
from frame.diffusion.encoder_identity import DigestBook, text_cache_for
from frame.models import demo_model_path
from tests.daemon.conftest import make_config

IDENTITY = "encoder-a"


class CountingEmbed:
    """A stand-in encoder: deterministic float32 rows, and the texts it was asked for."""

    def __init__(self):
        self.asked = []

    def __call__(self, texts):
        self.asked.append(list(texts))
        rows = [np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(8).astype(np.float32) for t in texts]
        return np.stack(rows)


def test_only_new_texts_are_computed_and_vectors_come_back_bit_exact(tmp_path):
    compute = CountingEmbed()
    cold = ec.CachedEmbed(ec.EmbeddingCache(tmp_path, IDENTITY), compute)
    first = cold(["a", "b", "c"])
    warm = ec.CachedEmbed(ec.EmbeddingCache(tmp_path, IDENTITY), compute)
    second = warm(["c", "d", "a", "b"])
    assert compute.asked == [["a", "b", "c"], ["d"]]
    assert (warm.computed, warm.reused) == (1, 3)
    assert second.dtype == np.float32
    assert second[[2, 3, 0]].tobytes() == first.tobytes()  # the same bits, not merely close


def test_another_encoder_identity_never_sees_the_vectors(tmp_path):
    compute = CountingEmbed()
    ec.CachedEmbed(ec.EmbeddingCache(tmp_path, IDENTITY), compute)(["a"])
    ec.CachedEmbed(ec.EmbeddingCache(tmp_path, "encoder-b"), compute)(["a"])
    assert compute.asked == [["a"], ["a"]]


@pytest.mark.parametrize("damage", ["flip", "truncate", "swap", "garbage"])
def test_a_damaged_entry_is_recomputed_never_trusted(tmp_path, damage):
    compute = CountingEmbed()
    cache = ec.EmbeddingCache(tmp_path, IDENTITY)
    good = ec.CachedEmbed(cache, compute)(["a", "b"])
    path = cache.path("a")
    raw = bytearray(path.read_bytes())
    if damage == "flip":
        raw[-3] ^= 0x40  # one bit of the vector
    elif damage == "truncate":
        raw = raw[:-4]
    elif damage == "swap":  # a sound entry, but of another text, under this text's name
        raw = bytearray(cache.path("b").read_bytes())
    else:
        raw = bytearray(b"\0" * len(raw))
    path.write_bytes(bytes(raw))
    assert cache.missing(["a", "b"]) == ["a"]  # the estimate's read-only look leaves the file
    assert path.exists()
    again = ec.CachedEmbed(cache, compute)(["a", "b"])
    assert compute.asked == [["a", "b"], ["a"]]
    assert again.tobytes() == good.tobytes()
    assert ec.decode_entry(path.read_bytes(), IDENTITY, "a").tobytes() == good[0].tobytes()  # rewritten whole


def test_the_folder_is_capped_least_recently_used_first(tmp_path):
    compute = CountingEmbed()
    size = len(ec.encode_entry(IDENTITY, "t0", np.zeros(8, np.float32)))
    cache = ec.EmbeddingCache(tmp_path, IDENTITY, cap_bytes=3 * size)
    embed = ec.CachedEmbed(cache, compute)
    for n, text in enumerate(["t0", "t1", "t2"]):
        embed([text])
        os.utime(cache.path(text), ns=(n * 10**9, n * 10**9))  # distinct use times on any filesystem
    embed(["t0"])  # used now: t1 is the least recently used
    embed(["t3"])
    kept = sorted(p.name for p in tmp_path.glob("*" + ec.SUFFIX))
    assert kept == sorted(cache.path(t).name for t in ["t0", "t2", "t3"])
    assert sum(p.stat().st_size for p in tmp_path.glob("*" + ec.SUFFIX)) <= 3 * size


def test_an_unwritable_folder_costs_time_not_the_night(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    embed = ec.CachedEmbed(ec.EmbeddingCache(blocker, IDENTITY), CountingEmbed())
    assert embed(["a"]).shape == (1, 8)


@pytest.fixture
def demo_copy(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(demo_model_path(), folder)
    return folder


def test_identity_follows_the_weights_content_not_their_dates(tmp_path, demo_copy):
    config = make_config(tmp_path, model={"source": str(demo_copy)})
    pipe = load_configured_pipeline(config)
    state = tmp_path / "state"
    first = text_cache_for(pipe, state).identity
    weights = demo_copy / "text_encoder" / "model.onnx"
    os.utime(weights)  # touched: digested again, same identity
    assert text_cache_for(pipe, state).identity == first
    book = DigestBook(ec.cache_folder(state))
    assert book.digest(weights, compute=False) is not None  # the book knows the touched file
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 1  # another "conversion": same name, same size
    weights.write_bytes(bytes(raw))
    assert text_cache_for(pipe, state, compute=False) is None  # the estimate never digests
    assert text_cache_for(pipe, state).identity != first


def test_demo_encoder_cached_rows_equal_fresh_rows_bit_for_bit(tmp_path):
    """A text embedded tonight beside other texts (another shared pass) gives the very bytes it gave
    alone: the cache may mix rows from different nights."""
    pipe = load_configured_pipeline(make_config(tmp_path, model={"source": "demo"}))
    texts = ["a stormy sea, oil painting", "a calm meadow", "a night city, ink", "a red fox", "moonlight"]
    together = pipe.embed_text(texts)
    cache = text_cache_for(pipe, tmp_path)
    warm = ec.CachedEmbed(cache, pipe.embed_text)
    warm([texts[3]])
    mixed = ec.CachedEmbed(text_cache_for(pipe, tmp_path), pipe.embed_text)(texts)
    assert mixed.tobytes() == together.tobytes()


def test_a_model_over_http_is_identified_by_its_server_validators(tmp_path, demo_copy):
    """No copy to digest on the Pi: the identity takes each weight file's ETag (else size and date)
    from a real ``frame serve-model``; a file replaced on the server changes it. A server that sends
    neither (only a size) gives no identity: no kept embeddings rather than a guess."""
    from frame.diffusion import load_pipeline
    from tests.engine.http_server import RangeServer
    from tests.modelserver.conftest import Served

    served = Served(demo_copy)
    try:
        pipe = load_pipeline(served.url(""), cache_dir=tmp_path / "small-files")
        first = text_cache_for(pipe, tmp_path / "state")
        assert first is not None and text_cache_for(pipe, tmp_path / "state").identity == first.identity
        weights = demo_copy / "text_encoder" / "model.onnx"
        raw = bytearray(weights.read_bytes())
        raw[-1] ^= 1
        weights.write_bytes(bytes(raw))
        os.utime(weights, ns=(10**18, 10**18))  # another modification date: the server's validator changes
        assert text_cache_for(pipe, tmp_path / "state").identity != first.identity
    finally:
        served.close()
    bare = RangeServer(str(demo_copy)).start()
    try:
        pipe = load_pipeline(bare.url(""), cache_dir=tmp_path / "other-files")
        assert text_cache_for(pipe, tmp_path / "state") is None
    finally:
        bare.stop()
