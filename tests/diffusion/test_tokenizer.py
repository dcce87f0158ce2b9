"""frame's CLIP tokenizer against ids recorded from transformers' CLIPTokenizerFast.

The expected ids come from ``tools/build_tokenizer_fixtures.py`` (run with transformers installed); the
vocabulary is the bundled demo model's real CLIP vocab.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from frame.diffusion.tokenizer import ClipTokenizer, SpecialTokens, normalize, pre_tokenize, read_tokenizer_folder
from frame.errors import FrameError
from frame.models import demo_model_path

CORPUS = Path(__file__).parents[1] / "fixtures" / "tokenizer" / "corpus.json"
VOCAB_DIR = demo_model_path() / "tokenizer"


@pytest.fixture(scope="module")
def corpus() -> dict:
    return json.loads(CORPUS.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def vocab_files() -> tuple:
    if not (VOCAB_DIR / "vocab.json").exists():
        pytest.skip(f"demo model tokenizer not present at {VOCAB_DIR}")
    return read_tokenizer_folder(VOCAB_DIR)


def _tokenizer(vocab_files, pad: str) -> ClipTokenizer:
    vocab, merges, _, _ = vocab_files
    return ClipTokenizer(vocab, merges, SpecialTokens(pad=pad), 77)


def test_fixture_was_recorded_with_this_vocabulary(corpus, vocab_files):
    vocab, merges, _, _ = vocab_files
    text = json.dumps(sorted(vocab.items()), ensure_ascii=False) + json.dumps(merges, ensure_ascii=False)
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == corpus["vocab_sha256"]
    assert len(corpus["cases"]) >= 200


@pytest.mark.parametrize(("pad", "suffix"), [("<|endoftext|>", ""), ("!", "_2")], ids=["sd15", "sdxl_2"])
def test_ids_identical_to_transformers(corpus, vocab_files, pad, suffix):
    tok = _tokenizer(vocab_files, pad)
    mismatches = []
    for case in corpus["cases"]:
        raw, row = tok.encode(case["prompt"]), tok(case["prompt"])
        if raw != case["raw_ids" + suffix] or row != case["input_ids" + suffix]:
            mismatches.append(case["prompt"])
    assert mismatches == []


def test_long_prompts_keep_first_75_tokens_and_end_with_eos(corpus, vocab_files):
    tok = _tokenizer(vocab_files, "!")
    long_cases = [c for c in corpus["cases"] if len(c["raw_ids"]) > 75]
    assert len(long_cases) >= 10
    for case in long_cases:
        row, truncated = tok.frame_ids(tok.encode(case["prompt"]))
        assert truncated
        assert len(row) == 77
        assert row[1:76] == case["raw_ids_2"][:75]
        assert row[-1] == tok.eos_id


def test_sdxl_second_tokenizer_pads_with_its_pad_token(vocab_files):
    tok = _tokenizer(vocab_files, "!")
    row = tok("a cat")
    assert row[:4] == [tok.bos_id, *tok.encode("a cat"), tok.eos_id]
    assert set(row[4:]) == {tok.vocab["!"]}
    assert tok.pad_id == 0


def test_from_folder_reads_special_tokens_and_length(tmp_path, vocab_files):
    folder = tmp_path / "tokenizer_2"
    folder.mkdir()
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(VOCAB_DIR / name, folder / name)
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "model_max_length": 77,
        "pad_token": {"content": "!", "lstrip": False},
        "bos_token": "<|startoftext|>",
    }))
    tok = ClipTokenizer.from_folder(folder)
    assert tok.special.pad == "!"
    assert tok.max_length == 77
    assert tok("hi")[-1] == tok.vocab["!"]


def test_missing_files_are_named(tmp_path):
    with pytest.raises(FrameError, match="tokenizer folder not found"):
        ClipTokenizer.from_folder(tmp_path / "nope")
    (tmp_path / "vocab.json").write_text("{}")
    with pytest.raises(FrameError, match="merges.txt"):
        ClipTokenizer.from_folder(tmp_path)


def test_unknown_special_token_is_an_error():
    with pytest.raises(FrameError, match="pad token"):
        ClipTokenizer({"<|startoftext|>": 0, "<|endoftext|>": 1}, [], SpecialTokens(pad="<pad>"))


def test_normalize_collapses_whitespace_and_lowercases_per_character():
    assert normalize("A\t\n  B\u3000C") == "a b c"
    # the fast tokenizer lowercases character by character: no final-sigma rule
    assert normalize("ΟΔΟΣ") == "οδοσ"
    assert normalize("e\u0301") == "é"


def test_pre_tokenize_splits_letters_digits_and_symbols():
    assert pre_tokenize("it's 2024!! café") == ["it", "'s", "2", "0", "2", "4", "!!", "café"]
    assert pre_tokenize("'red") == ["'re", "d"]
