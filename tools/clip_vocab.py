"""The real CLIP BPE vocabulary as Hugging Face tokenizer files (vocab.json, merges.txt, ...).

OpenAI's CLIP ships its BPE as ``bpe_simple_vocab_16e6.txt.gz`` (a header line, then one merge per
line). The same file is inside the ``open-clip-torch`` wheel, which pip can fetch from PyPI; the
zip is read directly (open_clip itself is never imported). The conversion follows CLIP's
``SimpleTokenizer``: the vocabulary is the 256 byte symbols of ``bytes_to_unicode``, the same 256
with ``</w>``, one token per merge (the first 49152 - 256 - 2 = 48894 merges), then
``<|startoftext|>`` and ``<|endoftext|>``: 49408 tokens, ids in that order.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zipfile
from pathlib import Path

WHEEL_SPEC = "open-clip-torch==3.3.0"
WHEEL_MEMBER = "open_clip/bpe_simple_vocab_16e6.txt.gz"
FULL_MERGES = 49152 - 256 - 2
BOS, EOS = "<|startoftext|>", "<|endoftext|>"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP's reversible byte -> printable unicode map (order matters: it fixes the ids)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def fetch_bpe(cache: Path) -> list[str]:
    """Return the merge lines (header dropped) from the open-clip-torch wheel, downloading it once."""
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob("open_clip_torch-3.3.0-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", WHEEL_SPEC, "--no-deps", "-d", str(cache)],
                       check=True)
        wheels = sorted(cache.glob("open_clip_torch-3.3.0-*.whl"))
    with zipfile.ZipFile(wheels[0]) as zf:
        text = gzip.decompress(zf.read(WHEEL_MEMBER)).decode("utf-8")
    return text.split("\n")[1:]


def build_vocab(merge_lines: list[str], num_merges: int = FULL_MERGES) -> tuple[dict[str, int], list[str]]:
    """CLIP's vocabulary and merges, optionally truncated to the first ``num_merges`` merges.

    A truncated list is still a valid, self-consistent CLIP BPE (what CLIP's own code does with its
    fixed slice), just with fewer merges: words split into more, shorter tokens. The pipeline
    fixtures use it to keep token embeddings small.
    """
    if not 0 <= num_merges <= FULL_MERGES:
        raise ValueError(f"num_merges must be in 0..{FULL_MERGES}, got {num_merges}")
    merges = merge_lines[:num_merges]
    symbols = list(bytes_to_unicode().values())
    tokens = symbols + [s + "</w>" for s in symbols] + ["".join(m.split()) for m in merges] + [BOS, EOS]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise ValueError("duplicate tokens in BPE merges")
    return vocab, merges


def write_tokenizer(folder: Path, vocab: dict[str, int], merges: list[str], pad_token: str = EOS) -> list[Path]:
    """Write the four files of a Stable Diffusion ``tokenizer/`` folder (as SD 1.5's repo has them).

    ``pad_token`` is ``<|endoftext|>`` for SD 1.5 / SDXL tokenizer and ``!`` for SDXL tokenizer_2.
    No tokenizer.json: transformers builds the fast tokenizer from vocab.json + merges.txt, and the
    file would add 3.6 MB.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    config = {
        "add_prefix_space": False,
        "bos_token": BOS,
        "clean_up_tokenization_spaces": True,
        "do_lower_case": True,
        "eos_token": EOS,
        "errors": "replace",
        "model_max_length": 77,
        "pad_token": pad_token,
        "tokenizer_class": "CLIPTokenizer",
        "unk_token": EOS,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    special = {"bos_token": BOS, "eos_token": EOS, "pad_token": pad_token, "unk_token": EOS}
    (folder / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
    return sorted(p for p in folder.iterdir() if p.is_file())


VERIFY_PROMPTS = [
    "a photo of a cat",
    "A Photo Of A CAT, oil painting!!! 4k  ",
    "Café crème brûlée — naïve façade, 東京 タワー 🌸🐈",
    "a lighthouse at dusk,  (dramatic lighting:1.3), [blurry], trending on artstation #art",
    "it's 1984-01-02 at 12:30pm; don't   panic",
    " ".join(["very"] * 90) + " long prompt",
]


def verify_tokenizer(folder: Path, expect_vocab: int) -> None:
    """Check the folder loads in transformers and tokenizes as CLIP does.

    transformers 5 has one CLIP tokenizer class (CLIPTokenizer is CLIPTokenizerFast), so the check
    compares ``CLIPTokenizerFast.from_pretrained(folder)`` with a ``CLIPTokenizer`` built in memory
    from the vocabulary and merges, on prompts with case, punctuation, accents, CJK, emoji,
    whitespace runs and > 77 tokens, and checks ids known from real CLIP.
    """
    from transformers import CLIPTokenizer, CLIPTokenizerFast

    fast = CLIPTokenizerFast.from_pretrained(str(folder))
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    merges = (folder / "merges.txt").read_text(encoding="utf-8").split("\n")[1:-1]
    pad = json.loads((folder / "special_tokens_map.json").read_text())["pad_token"]
    plain = CLIPTokenizer(vocab=vocab, merges=[tuple(m.split()) for m in merges], pad_token=pad,
                          model_max_length=77)
    if len(fast) != expect_vocab or len(plain) != expect_vocab:
        raise AssertionError(f"vocab size {len(fast)}/{len(plain)}, expected {expect_vocab}")
    for prompt in VERIFY_PROMPTS:
        a = fast(prompt, padding="max_length", max_length=77, truncation=True).input_ids
        b = plain(prompt, padding="max_length", max_length=77, truncation=True).input_ids
        if a != b or len(a) != 77 or a[0] != vocab[BOS]:
            raise AssertionError(f"tokenizers disagree on {prompt!r}: {a} vs {b}")
    if fast.pad_token_id != vocab[pad]:
        raise AssertionError(f"pad id {fast.pad_token_id} != {vocab[pad]}")
    if expect_vocab == 49408:
        ids = fast("a photo of a cat").input_ids
        if ids != [49406, 320, 1125, 539, 320, 2368, 49407]:
            raise AssertionError(f"unexpected CLIP ids for 'a photo of a cat': {ids}")
