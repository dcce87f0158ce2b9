"""Text conditioning: prompts → the UNet's ``encoder_hidden_states`` (+ SDXL's ``text_embeds``).

SD 1.5 uses the text encoder's ``last_hidden_state``. SDXL, like diffusers' StableDiffusionXLPipeline,
uses the penultimate hidden state of both encoders concatenated per token (768 + 1280 = 2048 channels)
and the projected pooled output (``text_embeds``) of the second encoder. Emphasis weights (A1111
syntax) scale each encoder's hidden states before concatenation. Each encoder is loaded, run for the
prompt and the negative prompt, and closed before the next one, so only one is ever in memory.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from frame.diffusion import textual_inversion as ti
from frame.diffusion.emphasis import apply_token_weights
from frame.diffusion.model_info import SDXL, ModelInfo
from frame.diffusion.tokenizer import ClipTokenizer
from frame.engine.memory import with_model
from frame.errors import FrameError

if TYPE_CHECKING:
    from frame.engine.onnxstream.source import OnnxStreamSource
    from frame.engine.runnable import Runnable

Load = Callable[["str | OnnxStreamSource"], "Runnable"]  # a component's source -> the loaded component

log = logging.getLogger(__name__)

_HIDDEN = re.compile(r"^hidden_states\.(\d+)$")


@dataclass(frozen=True)
class Conditioning:
    """One prompt's UNet conditioning: per-token states (1, 77, D) and SDXL's pooled embedding (1, P)."""

    hidden: np.ndarray
    pooled: np.ndarray | None = None


@dataclass(frozen=True)
class Encoder:
    """A text encoder component: its tokenizer folder and where its ONNX file is.

    The tokenizer (tens of MB of Python objects) is built only while encoding, then dropped, so it
    does not sit in memory next to the UNet.
    """

    name: str
    tokenizer_folder: Path
    source: str | OnnxStreamSource  # a path or URL, or an OnnxStream model
    pad_token: str | None = None  # overrides the folder's (OnnxStream's shared SDXL tokenizer folder)

    def tokenizer(self) -> ClipTokenizer:
        return ClipTokenizer.from_folder(self.tokenizer_folder, self.pad_token)


def _input_ids(model: Runnable, ids: list[int], name: str) -> dict[str, np.ndarray]:
    spec = next((i for i in model.inputs if i.name == "input_ids"), None)
    if spec is None:
        raise FrameError(f"{name}: the ONNX model has no 'input_ids' input "
                         f"(inputs: {', '.join(i.name for i in model.inputs)})")
    if spec.shape and len(spec.shape) == 2 and isinstance(spec.shape[1], int) and spec.shape[1] != len(ids):
        raise FrameError(f"{name}: the export takes {spec.shape[1]} tokens, the tokenizer makes {len(ids)}")
    return {"input_ids": np.asarray([ids], dtype=spec.dtype)}


def penultimate_name(model: Runnable, name: str) -> str:
    """Name of the second-to-last ``hidden_states.N`` output (the layer SDXL conditions on)."""
    layers = sorted(int(m.group(1)) for o in model.outputs if (m := _HIDDEN.match(o.name)))
    if len(layers) < 2:
        raise FrameError(f"{name}: the export has no hidden_states.N outputs; SDXL needs the penultimate "
                         "layer (export the text encoders with output_hidden_states)")
    return f"hidden_states.{layers[-2]}"


def _output(results: dict[str, np.ndarray], key: str, name: str) -> np.ndarray:
    if key not in results:
        raise FrameError(f"{name}: the ONNX model has no {key!r} output (outputs: {', '.join(results)})")
    return results[key]


def encode_with(encoder: Encoder, load: Load, texts: list[str], kind: str, second: bool,
                warn: Callable[[str], None], embeddings: ti.Embeddings | None = None) -> list[Conditioning]:
    """Run one encoder over ``texts``; returns one Conditioning (hidden, pooled-or-None) per text.
    ``embeddings``: the textual-inversion files a prompt word may name (``textual_inversion``)."""
    tokenizer = encoder.tokenizer()

    def run(model: Runnable) -> list[Conditioning]:
        found = ti.usable(embeddings, model, encoder.name, warn)
        hidden_key = "last_hidden_state" if kind != SDXL else penultimate_name(model, encoder.name)
        table = "" if kind != SDXL else ti.SDXL_TABLES[int(second)]
        width = ti.table_width(model) if found.files() else None
        results = []
        for text in texts:
            tokens = found.tokens(tokenizer, text, table, width, warn)
            if tokens.truncated:
                warn(f"prompt longer than {tokenizer.max_length - 2} tokens; the rest is ignored: "
                     f"{text[:60]!r}…")
            feeds = _input_ids(model, tokens.ids, encoder.name)
            overrides = ti.token_overrides(model, tokens.fixes, encoder.name)
            out = model.run(feeds, overrides=overrides) if overrides else model.run(feeds)
            hidden = apply_token_weights(_output(out, hidden_key, encoder.name).astype(np.float32), tokens.weights)
            pooled = _output(out, "text_embeds", encoder.name) if second else None
            results.append(Conditioning(hidden, None if pooled is None else pooled.astype(np.float32)))
        return results

    return with_model(load, encoder.source, run)


def encode_prompts(encoders: list[Encoder], load: Load, info: ModelInfo, prompt: str,
                   negative: str | None, guided: bool, warn: Callable[[str], None],
                   embeddings: ti.Embeddings | None = None) -> tuple[Conditioning, Conditioning | None]:
    """Conditioning for the prompt and, when ``guided``, for the unconditional (negative) pass.

    As in diffusers, ``negative=None`` means the empty prompt, except for SDXL exports with
    ``force_zeros_for_empty_prompt`` where it means all-zero embeddings; ``""`` is always encoded.
    """
    zero_negative = guided and negative is None and info.kind == SDXL and info.force_zeros_for_empty_prompt
    texts = [prompt] if not guided or zero_negative else [prompt, negative or ""]
    per_encoder = [encode_with(e, load, texts, info.kind, i == 1, warn, embeddings) for i, e in enumerate(encoders)]
    combined = []
    for position in range(len(texts)):
        parts = [results[position] for results in per_encoder]
        hidden = np.concatenate([p.hidden for p in parts], axis=-1)
        combined.append(Conditioning(hidden, parts[-1].pooled))
    cond = combined[0]
    if not guided:
        return cond, None
    if zero_negative:
        pooled = None if cond.pooled is None else np.zeros_like(cond.pooled)
        return cond, Conditioning(np.zeros_like(cond.hidden), pooled)
    return cond, combined[1]


# Texts per shared pass. Each extra text costs about 14.5 MB more peak on SDXL's OpenCLIP encoder
# (fp16, VmHWM of one shared run: 1 text 104 MB, 4 texts 148, 8 texts 206, 14 texts 300;
# benchmarks/text_passes_memory.py). Four keep the encoder far below the night's VAE peak and read
# its weights a quarter as often. A text's activations grow with its positions, so a pass holds
# ``POSITIONS_PER_PASS`` positions, four padded texts' worth: texts run through end-of-text
# (``through_end_of_text``, 8-20 positions for a prompt) share one pass by ten or twenty.
TEXTS_PER_PASS = 4
MAX_POSITIONS = 77


def texts_per_pass(positions: int | None = None) -> int:
    """Texts one shared pass takes when the longest has ``positions`` positions (None: all 77):
    ``TEXTS_PER_PASS`` padded texts' positions, at least one text."""
    longest = MAX_POSITIONS if not positions else min(int(positions), MAX_POSITIONS)
    return max(1, TEXTS_PER_PASS * MAX_POSITIONS // longest)


def pass_sizes(count: int, per_pass: int | None = None) -> list[int]:
    """How many texts each shared pass takes for ``count`` texts: sizes that differ by at most one,
    none over ``per_pass`` (default ``TEXTS_PER_PASS``; ``frame.estimate.plan`` counts the same passes)."""
    if count <= 0:
        return []
    passes = -(-count // (per_pass or TEXTS_PER_PASS))
    size, longer = divmod(count, passes)  # the first ``longer`` passes take one text more
    return [size + (index < longer) for index in range(passes)]


def text_passes(texts: list, per_pass: int | None = None) -> list[list]:
    """``texts`` in consecutive groups of ``pass_sizes(len(texts), per_pass)``."""
    groups, start = [], 0
    for size in pass_sizes(len(texts), per_pass):
        groups.append(texts[start:start + size])
        start += size
    return groups


def through_end_of_text(model: Runnable, ids: list[int], eos_id: int) -> list[int]:
    """``ids`` up to and including the first end-of-text token, when the export's sequence axis is
    dynamic; all 77 otherwise.

    CLIP's text encoders (SD 1.5's ViT-L, SDXL's ViT-L and OpenCLIP bigG) attend causally: a token
    sees only the tokens before it, so the padding after end-of-text changes nothing of the states up
    to it, and the pooled output is the final state at that token (``pooler_output``/``text_embeds``
    gather it at the argmax of the ids, the end-of-text token, whose id is the vocabulary's largest).
    A night's prompts are 8–20 tokens: the picker's passes compute about a fifth of the 77 positions.
    The result equals the padded run's up to float32 rounding (the matrix products have fewer rows),
    the same on every run.
    """
    spec = next((i for i in model.inputs if i.name == "input_ids"), None)
    static = spec is None or not spec.shape or len(spec.shape) != 2 or isinstance(spec.shape[1], int)
    if static or eos_id not in ids:
        return ids
    return ids[:ids.index(eos_id) + 1]


def tokens_through_end(encoder: Encoder, texts: list[str]) -> int:
    """The most positions ``through_end_of_text`` keeps for any of ``texts`` (what the estimate counts
    a choose pass at; 77 for an export with a fixed sequence length, where ``concrete`` keeps it)."""
    if not texts:
        return 0
    tokenizer = encoder.tokenizer()
    lengths = []
    for text in texts:
        ids = tokenizer(text)
        lengths.append(ids.index(tokenizer.eos_id) + 1 if tokenizer.eos_id in ids else len(ids))
    return max(lengths)


def pooled_embeddings(encoder: Encoder, load: Load, texts: list[str], projected: bool,
                      embeddings: ti.Embeddings | None = None, table: str = "") -> np.ndarray:
    """(len(texts), D) pooled text embeddings: ``text_embeds`` if ``projected`` else ``pooler_output``.

    Each text runs through its end-of-text token (``through_end_of_text``), and the texts go through
    the encoder in passes of ``texts_per_pass`` of the longest (``text_passes``: four padded texts'
    positions), each one shared run: every weight is read once per pass, not once per text. The taste
    picker embeds every candidate and rated prompt of a night (80+ texts), and SDXL's OpenCLIP encoder
    is 1.4 GB in fp16: read per text, that was 117 GB from the SD card, most of a Pi's night.

    Exports without ``pooler_output`` fall back to the last hidden state at the end-of-text token,
    which is what CLIP's pooler returns. A text naming a textual-inversion embedding (``embeddings``,
    ``table`` as in ``encode_with``) runs on its own with the embedding's rows put in.
    """
    tokenizer = encoder.tokenizer()
    model = load(encoder.source)
    try:
        rows = []
        fixes: list[list] = [[] for _ in texts]
        embeddings = ti.usable(embeddings, model, encoder.name, log.warning)
        if embeddings.files():
            width = ti.table_width(model)
            prompts = [embeddings.tokens(tokenizer, text, table, width, log.warning) for text in texts]
            fixes = [prompt.fixes for prompt in prompts]
            tokens = [through_end_of_text(model, prompt.ids, tokenizer.eos_id) for prompt in prompts]
        else:
            tokens = [through_end_of_text(model, tokenizer(text), tokenizer.eos_id) for text in texts]
        per_pass = texts_per_pass(max((len(one) for one in tokens), default=MAX_POSITIONS))
        start = 0
        for ids in text_passes(tokens, per_pass):
            feeds = [_input_ids(model, one, encoder.name) for one in ids]
            own = fixes[start:start + len(ids)]
            start += len(ids)
            if any(own):
                outs = [model.run(f, overrides=ti.token_overrides(model, fix, encoder.name)) if fix else model.run(f)
                        for f, fix in zip(feeds, own)]
            elif len(feeds) > 1:
                outs = model.run_shared(feeds)
            else:
                outs = [model.run(f) for f in feeds]
            for one, out in zip(ids, outs):
                if projected:
                    rows.append(_output(out, "text_embeds", encoder.name)[0])
                elif "pooler_output" in out:
                    rows.append(out["pooler_output"][0])
                else:
                    hidden = _output(out, "last_hidden_state", encoder.name)
                    rows.append(hidden[0, one.index(tokenizer.eos_id)])
        return np.stack(rows).astype(np.float32)
    finally:
        model.close()
