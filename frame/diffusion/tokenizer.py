"""CLIP byte-level BPE tokenizer, token-for-token identical to transformers' CLIPTokenizerFast.

Stable Diffusion's text encoders were trained on token ids from OpenAI's CLIP tokenizer; diffusers uses
the Hugging Face "fast" variant built from the model folder's ``vocab.json`` + ``merges.txt``. Any
difference in ids changes the picture, so this module reproduces that tokenizer exactly with the standard
library only (no ``tokenizers``/``regex`` wheels on the Pi):

1. special tokens (``<|startoftext|>``, ``<|endoftext|>``, an added pad token such as SDXL's ``!``)
   are cut out of the raw text first, like the fast tokenizer's added-token pass;
2. normalisation: Unicode NFC, every whitespace run → one space, per-character lowercase;
3. pre-tokenisation: contractions (``'s 't 're 've 'm 'll 'd``), runs of letters, single digits and
   runs of other non-space characters; whitespace is dropped;
4. each piece is UTF-8 encoded and mapped byte-by-byte to printable characters (GPT-2 byte level);
5. BPE merges by rank inside each piece, ``</w>`` marking the end of the piece.

Character classes follow Unicode general categories (letters ``L*``, numbers ``N*``) and the Unicode
``White_Space`` property, which is what Oniguruma's ``\\p{L}``, ``\\p{N}`` and ``\\s`` mean in the fast
tokenizer (Python's ``re`` has no ``\\p{..}`` and its ``\\s`` differs for a few control characters).
"""

from __future__ import annotations

import json
import logging
import unicodedata
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from frame.errors import FrameError

log = logging.getLogger(__name__)

# Unicode White_Space property (PropList.txt); Oniguruma's \s in Unicode mode.
WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")
END_OF_WORD = "</w>"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable character table used by CLIP's vocabulary.

    Printable Latin-1 bytes map to themselves; the other 68 bytes map to code points 256, 257, ... in
    byte order, so every byte string becomes a string of visible characters.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


_BYTE_CHARS = bytes_to_unicode()


def normalize(text: str) -> str:
    """NFC, collapse whitespace runs to one space, lowercase each character on its own.

    Lowercasing is per character on purpose: the fast tokenizer maps ``Σ`` to ``σ`` everywhere, while
    Python's ``str.lower`` would apply the final-sigma rule.
    """
    text = unicodedata.normalize("NFC", text)
    out: list[str] = []
    in_space = False
    for ch in text:
        if ch in WHITESPACE:
            if not in_space:
                out.append(" ")
            in_space = True
            continue
        in_space = False
        out.append(ch.lower())
    return "".join(out)


def _char_class(ch: str) -> str:
    if ch in WHITESPACE:
        return "space"
    category = unicodedata.category(ch)
    if category[0] == "L":
        return "letter"
    if category[0] == "N":
        return "number"
    return "other"


def pre_tokenize(text: str) -> list[str]:
    """Split normalised text like the fast tokenizer's CLIP split pattern (leftmost-first alternation).

    Equivalent to ``'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+`` with the
    unmatched (whitespace) parts removed.
    """
    pieces: list[str] = []
    i, n = 0, len(text)
    while i < n:
        contraction = next((c for c in CONTRACTIONS if text.startswith(c, i)), None)
        if contraction is not None:
            pieces.append(contraction)
            i += len(contraction)
            continue
        kind = _char_class(text[i])
        if kind == "space":
            i += 1
            continue
        if kind == "number":
            pieces.append(text[i])
            i += 1
            continue
        j = i + 1
        while j < n and _char_class(text[j]) == kind:
            j += 1
        pieces.append(text[i:j])
        i = j
    return pieces


@dataclass(frozen=True)
class SpecialTokens:
    """The tokens wrapped around every prompt and used for padding (SDXL's second tokenizer pads with '!')."""

    bos: str = "<|startoftext|>"
    eos: str = "<|endoftext|>"
    pad: str = "<|endoftext|>"
    unk: str = "<|endoftext|>"


class ClipTokenizer:
    """Byte-level BPE over a CLIP vocabulary; ``encode`` gives raw ids, ``__call__`` the model input row."""

    def __init__(
        self,
        vocab: dict[str, int],
        merges: list[tuple[str, str]],
        special: SpecialTokens | None = None,
        max_length: int = 77,
    ) -> None:
        self.vocab = vocab
        self.special = special or SpecialTokens()
        self.max_length = max_length
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        for name in ("bos", "eos", "pad", "unk"):
            token = getattr(self.special, name)
            if token not in vocab:
                raise FrameError(f"tokenizer: {name} token {token!r} is not in vocab.json")
        self.bos_id = vocab[self.special.bos]
        self.eos_id = vocab[self.special.eos]
        self.pad_id = vocab[self.special.pad]
        self.unk_id = vocab[self.special.unk]
        # Longest first so '<|endoftext|>' is never shadowed by a shorter special token.
        self._added = sorted({self.special.bos, self.special.eos, self.special.pad}, key=len, reverse=True)
        self._bpe = lru_cache(maxsize=4096)(self._bpe_uncached)

    @classmethod
    def from_folder(cls, folder: str | Path, pad_token: str | None = None) -> ClipTokenizer:
        """Build from a diffusers ``tokenizer``/``tokenizer_2`` folder (vocab.json, merges.txt, configs)
        or an OnnxStream one (vocab.txt, merges.txt); ``pad_token`` overrides the folder's."""
        vocab, merges, special, max_length = read_tokenizer_folder(Path(folder))
        if pad_token is not None:
            special = replace(special, pad=pad_token)
        return cls(vocab, merges, special, max_length)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without start/end tokens, padding or truncation."""
        ids: list[int] = []
        for segment, is_special in self._split_added(text):
            if is_special:
                ids.append(self.vocab[segment])
                continue
            for piece in pre_tokenize(normalize(segment)):
                ids.extend(self._bpe("".join(_BYTE_CHARS[b] for b in piece.encode("utf-8"))))
        return ids

    def __call__(self, text: str) -> list[int]:
        """``max_length`` ids: start token, at most ``max_length - 2`` text tokens, end token, padding."""
        ids, _ = self.frame_ids(self.encode(text))
        return ids

    def frame_ids(self, ids: list[int]) -> tuple[list[int], bool]:
        """Wrap raw ids in start/end tokens and pad; returns (row, whether text tokens were dropped)."""
        room = self.max_length - 2
        truncated = len(ids) > room
        row = [self.bos_id, *ids[:room], self.eos_id]
        row += [self.pad_id] * (self.max_length - len(row))
        return row, truncated

    def _split_added(self, text: str) -> list[tuple[str, bool]]:
        """Cut special tokens out of the raw text before normalisation (case-sensitive, like added tokens)."""
        segments: list[tuple[str, bool]] = []
        start = i = 0
        while i < len(text):
            token = next((t for t in self._added if text.startswith(t, i)), None)
            if token is None:
                i += 1
                continue
            if i > start:
                segments.append((text[start:i], False))
            segments.append((token, True))
            i += len(token)
            start = i
        if start < len(text):
            segments.append((text[start:], False))
        return segments

    def _bpe_uncached(self, word: str) -> tuple[int, ...]:
        """Merge the characters of one byte-level word, lowest merge rank first, leftmost on ties."""
        symbols = list(word)
        symbols[-1] += END_OF_WORD
        while len(symbols) > 1:
            best_rank, best_at = None, -1
            for at in range(len(symbols) - 1):
                rank = self.ranks.get((symbols[at], symbols[at + 1]))
                if rank is not None and (best_rank is None or rank < best_rank):
                    best_rank, best_at = rank, at
            if best_rank is None:
                break
            pair = (symbols[best_at], symbols[best_at + 1])
            merged: list[str] = []
            at = 0
            while at < len(symbols):
                if at < len(symbols) - 1 and (symbols[at], symbols[at + 1]) == pair:
                    merged.append(pair[0] + pair[1])
                    at += 2
                else:
                    merged.append(symbols[at])
                    at += 1
            symbols = merged
        return tuple(self.vocab.get(s, self.unk_id) for s in symbols)


def read_tokenizer_folder(folder: Path) -> tuple[dict[str, int], list[tuple[str, str]], SpecialTokens, int]:
    """Vocabulary, merges, special tokens and length limit from a diffusers tokenizer folder.

    Special tokens come from ``special_tokens_map.json`` / ``tokenizer_config.json`` when present (their
    values are plain strings or serialised AddedToken dicts); ``model_max_length`` defaults to CLIP's 77.
    """
    if not folder.is_dir():
        raise FrameError(f"tokenizer folder not found: {folder}")
    if not (folder / "vocab.json").exists() and (folder / "vocab.txt").exists():
        return read_vocab_txt(folder / "vocab.txt"), read_merges(folder / "merges.txt"), SpecialTokens(), 77
    vocab = load_json(folder / "vocab.json")
    merges = read_merges(folder / "merges.txt")
    config: dict = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        if (folder / name).exists():
            config.update(load_json(folder / name))
    defaults = SpecialTokens()
    values = {}
    for key in ("bos", "eos", "pad", "unk"):
        value = config.get(f"{key}_token", getattr(defaults, key))
        values[key] = value["content"] if isinstance(value, dict) else str(value)
    max_length = config.get("model_max_length", 77)
    if not isinstance(max_length, int) or not 2 < max_length <= 4096:
        max_length = 77
    return vocab, merges, SpecialTokens(**values), max_length


def read_vocab_txt(path: Path) -> dict[str, int]:
    """OnnxStream's vocabulary: one token per line, the line number (from 0) is the id.

    Its merges.txt ranks continue after the vocabulary (OnnxStream numbers them from the vocab size),
    which leaves their order, all that BPE uses, the same as in a diffusers merges.txt.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise FrameError(f"missing tokenizer file: {path}") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    vocab: dict[str, int] = {}
    for number, token in enumerate(lines):
        token = token.removesuffix("\r")
        if not token or token in vocab:
            raise FrameError(f"{path}:{number + 1}: {'empty' if not token else 'repeated'} token {token!r}")
        vocab[token] = number
    return vocab


def read_merges(path: Path) -> list[tuple[str, str]]:
    """Merge pairs in rank order; skips the ``#version`` header and blank lines."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError as exc:
        raise FrameError(f"missing tokenizer file: {path}") from exc
    merges = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise FrameError(f"{path}:{number}: expected two symbols per merge, got {line!r}")
        merges.append((parts[0], parts[1]))
    return merges


def load_json(path: Path) -> dict:
    """Read a JSON file, naming the file in the error when it is missing or malformed."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise FrameError(f"missing tokenizer file: {path}") from exc
    except json.JSONDecodeError as exc:
        raise FrameError(f"{path}: not valid JSON ({exc})") from exc
