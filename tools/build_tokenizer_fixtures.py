"""Record transformers' CLIP tokenizer output for a prompt corpus (dev-only: needs transformers).

Writes ``tests/fixtures/tokenizer/corpus.json``: the prompts, the padded/truncated ``input_ids`` that
diffusers would feed the text encoder for SD 1.5's tokenizer (pad = ``<|endoftext|>``) and SDXL's
``tokenizer_2`` (pad = ``!``), and the raw ids without special tokens. frame's own tokenizer is tested
against these ids without needing transformers.

The vocabulary comes from a diffusers tokenizer folder (``--vocab-dir``, default: the bundled demo
model's) or, with ``--from-open-clip WHEEL``, is converted from open-clip's ``bpe_simple_vocab_16e6.txt.gz``
into the ``vocab.json`` + ``merges.txt`` layout transformers uses (written to ``--vocab-dir``).

Usage::

    /work/venv/bin/python tools/build_tokenizer_fixtures.py [--vocab-dir DIR] [--from-open-clip WHEEL]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import random
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from frame.diffusion.tokenizer import bytes_to_unicode  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "tokenizer"
DEFAULT_VOCAB = ROOT / "frame" / "models" / "demo" / "tokenizer"
MERGES_IN_CLIP = 49152 - 256 - 2


def convert_open_clip(wheel: Path, out_dir: Path) -> None:
    """vocab.json/merges.txt exactly as the CLIP vocabulary is laid out on the Hugging Face hub."""
    with zipfile.ZipFile(wheel) as zf:
        raw = zf.read("open_clip/bpe_simple_vocab_16e6.txt.gz")
    lines = gzip.open(io.BytesIO(raw)).read().decode("utf-8").split("\n")
    merges = [tuple(line.split()) for line in lines[1 : MERGES_IN_CLIP + 1]]
    byte_chars = list(bytes_to_unicode().values())
    tokens = byte_chars + [c + "</w>" for c in byte_chars] + ["".join(m) for m in merges]
    tokens += ["<|startoftext|>", "<|endoftext|>"]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}, ensure_ascii=False))
    (out_dir / "merges.txt").write_text("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n")


HAND_WRITTEN = [
    "",
    " ",
    "a photo of a cat",
    "A Photo Of A CAT",
    "a photograph of an astronaut riding a horse",
    "An",
    "it's the dog's bone, isn't it? they're here, we've won, I'm sure, you'll see, he'd go",
    "IT'S LOUD'S 'S 'T 'RE 'VE 'M 'LL 'D",
    "rock'n'roll o'clock 'quoted' \"double quoted\"",
    "’typographic’ apostrophes don’t split",
    "hello,world!how.are;you:today?",
    "!!! ??? ... --- *** ### $$$ %%% ^^^ &&& ~~~",
    "wow!! great!!! yes!",
    "! ! ! !",
    "1234567890",
    "3.14159 and 1,000,000 and 2024-01-31 and 10:45pm",
    "4k 8k uhd 1080p 35mm f/1.8 iso100",
    "½ ¼ ² ³ Ⅻ ⅻ ① ٣ ३ 〇",
    "café crème brûlée naïve façade jalapeño",
    "cafe\u0301 (combining accent)",
    "Straße Größe ÄÖÜ äöü",
    "ΟΔΟΣ ΣΟΦΙΑ ελληνικά",
    "İstanbul ıi IJ ǅ",
    "東京の夜景、ネオン、雨",
    "北京 上海 广州",
    "한국어 프롬프트",
    "مرحبا بالعالم",
    "שלום עולם",
    "привет мир, ЗИМНИЙ ЛЕС",
    "हिन्दी पाठ",
    "ไทย ภาษา",
    "emoji 😀 😃😄 🐱‍👤 👨‍👩‍👧‍👦 👍🏽 🇫🇷 ❤️",
    "🌅🌄🌠",
    "spaces    between     words",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\nmixed \t \n here",
    "non\u00a0breaking\u2003em\u3000ideographic space",
    "zero\u200bwidth\u200djoiner\ufeffbom",
    "control\x1cchars\x1fhere\x07bell",
    "<|startoftext|> inside text <|endoftext|> and more",
    "<|ENDOFTEXT|> is not special",
    "a<|endoftext|>b",
    "(masterpiece:1.2), best quality, [blurry], ((detailed))",
    "\\(escaped\\) parens",
    "snake_case and kebab-case and CamelCase",
    "email@example.com https://example.com/path?x=1&y=2",
    "C++ C# F# .NET node.js",
    "ｆｕｌｌｗｉｄｔｈ　ＴＥＸＴ １２３",
    "ﬁ ligature ﬂ and Ⅸ",
    "math ∑ ∫ √ ∞ ≈ ≠ ≤ ≥ π",
    "currency € £ ¥ ₹ ₿",
    "arrows → ← ↑ ↓ ⇒",
    "box ─│┌┐ and blocks ▀▄█",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "A", "a", "I", "i", ".", "'", "''", "'s", "x's", "!'s",
]

SUBJECTS = [
    "a lighthouse", "an old oak tree", "a red fox", "mountains at dawn", "a quiet harbour", "a cyberpunk city",
    "a bowl of fruit", "a sleeping cat", "an astronaut", "a castle on a hill", "a field of sunflowers",
    "a portrait of a woman", "a steam locomotive", "a koi pond", "Mount Fuji", "the Eiffel Tower",
]
STYLES = [
    "oil painting", "watercolor", "ukiyo-e woodblock print", "pencil sketch", "Studio Ghibli style",
    "by Claude Monet", "art nouveau", "low poly 3D render", "35mm film photo", "charcoal drawing",
    "pixel art", "impressionism", "Van Gogh's starry style", "line art, black & white",
]
MODIFIERS = [
    "highly detailed", "8K", "trending on ArtStation", "soft light", "golden hour", "HDR",
    "dramatic lighting!", "volumetric fog", "f/2.8", "(masterpiece)", "[low quality]", "ultra-wide",
    "1990s", "café ambience", "neon-lit", "snow ❄", "sunset 🌇", "4:3", "#1 best", "100%",
]


def generated_prompts(count: int, seed: int = 0) -> list[str]:
    """Deterministic prompt mix: subject, style, modifiers, random casing/spacing/punctuation."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(count):
        parts = [rng.choice(SUBJECTS), rng.choice(STYLES), *rng.sample(MODIFIERS, rng.randint(0, 5))]
        sep = rng.choice([", ", ",", " , ", "; ", " | ", ",  ", ". "])
        text = sep.join(parts)
        casing = rng.random()
        if casing < 0.15:
            text = text.upper()
        elif casing < 0.3:
            text = text.title()
        if rng.random() < 0.2:
            text = "  " + text.replace(" ", rng.choice(["  ", "\t", " \n "]), 2) + " "
        prompts.append(text)
    return prompts


def long_prompts(count: int, seed: int = 1) -> list[str]:
    """Prompts well over 77 tokens, to check truncation keeps the first 75 and ends with EOS."""
    rng = random.Random(seed)
    words = SUBJECTS + STYLES + MODIFIERS
    return [", ".join(rng.choice(words) for _ in range(rng.randint(30, 60))) for _ in range(count)]


def corpus() -> list[str]:
    return HAND_WRITTEN + generated_prompts(150) + long_prompts(12)


def vocab_digest(vocab_dir: Path) -> str:
    """Hash of the parsed vocabulary and merges, so tests notice a different vocab folder."""
    from frame.diffusion.tokenizer import read_tokenizer_folder

    vocab, merges, _, _ = read_tokenizer_folder(vocab_dir)
    text = json.dumps(sorted(vocab.items()), ensure_ascii=False) + json.dumps(merges, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def record(vocab_dir: Path) -> list[dict]:
    """One case per prompt: raw ids, SD 1.5 ``input_ids`` and SDXL ``tokenizer_2`` ``input_ids``."""
    from transformers import CLIPTokenizerFast

    files = (str(vocab_dir / "vocab.json"), str(vocab_dir / "merges.txt"))
    tok = CLIPTokenizerFast(*files, pad_token="<|endoftext|>")
    tok_2 = CLIPTokenizerFast(*files, pad_token="!")
    cases = []
    for prompt in corpus():
        cases.append({
            "prompt": prompt,
            "raw_ids": tok(prompt, add_special_tokens=False)["input_ids"],
            "raw_ids_2": tok_2(prompt, add_special_tokens=False)["input_ids"],
            "input_ids": tok(prompt, padding="max_length", max_length=77, truncation=True)["input_ids"],
            "input_ids_2": tok_2(prompt, padding="max_length", max_length=77, truncation=True)["input_ids"],
        })
    return cases


def check_all_characters(vocab_dir: Path) -> int:
    """Compare frame's tokenizer with transformers on every assigned code point; returns mismatches.

    Each character is placed between letters and digits and repeated, which exercises the character
    classes, lowercasing and byte-level BPE. Code points unassigned in Python's Unicode database are
    skipped: newer tokenizers builds know later Unicode versions.
    """
    import unicodedata

    from transformers import CLIPTokenizerFast

    from frame.diffusion.tokenizer import ClipTokenizer

    tok = CLIPTokenizerFast(str(vocab_dir / "vocab.json"), str(vocab_dir / "merges.txt"))
    ours = ClipTokenizer.from_folder(vocab_dir)
    texts = [
        f"a{c}1{c}{c}b" for c in map(chr, range(0x110000))
        if not 0xD800 <= ord(c) < 0xE000 and unicodedata.category(c) != "Cn"
    ]
    bad = 0
    for start in range(0, len(texts), 20000):
        chunk = texts[start : start + 20000]
        for text, ids in zip(chunk, tok(chunk, add_special_tokens=False)["input_ids"]):
            if ours.encode(text) != ids:
                bad += 1
                print(f"mismatch U+{ord(text[1]):04X}: expected {ids}, got {ours.encode(text)}")
    print(f"{len(texts)} characters checked (Unicode {unicodedata.unidata_version}), {bad} mismatches")
    return bad


def write(cases: list[dict], digest: str, path: Path) -> None:
    """JSON with one case per line: small diffs when the corpus changes."""
    lines = [json.dumps(case, ensure_ascii=False, separators=(",", ":")) for case in cases]
    header = json.dumps({"vocab_sha256": digest})[:-1]
    path.write_text(header + ',\n"cases":[\n' + ",\n".join(lines) + "\n]}\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab-dir", type=Path, default=DEFAULT_VOCAB)
    parser.add_argument("--from-open-clip", type=Path, help="open-clip-torch wheel to convert the vocab from")
    parser.add_argument("--check-all-characters", action="store_true",
                        help="also compare every assigned Unicode code point (about 2 minutes)")
    args = parser.parse_args()
    if args.from_open_clip:
        convert_open_clip(args.from_open_clip, args.vocab_dir)
    OUT.mkdir(parents=True, exist_ok=True)
    cases = record(args.vocab_dir)
    write(cases, vocab_digest(args.vocab_dir), OUT / "corpus.json")
    print(f"wrote {len(cases)} prompts to {OUT / 'corpus.json'}")
    if args.check_all_characters:
        return 1 if check_all_characters(args.vocab_dir) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
