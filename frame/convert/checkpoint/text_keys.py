"""The text encoders of an original checkpoint under transformers' CLIPTextModel names.

Two layouts occur:

* OpenAI CLIP ViT-L (SD 1.x ``cond_stage_model.transformer.``, SDXL ``conditioner.embedders.0.transformer.``)
  is already a transformers CLIPTextModel: only the prefix goes (older files lack the ``text_model.``
  level, which is added). The ``position_ids`` buffer some files carry is not a weight and is skipped.
* OpenCLIP (SD 2.x ViT-H ``cond_stage_model.model.``, SDXL bigG ``conditioner.embedders.1.model.``) has
  its own names: ``transformer.resblocks.N`` are ``encoder.layers.N`` with ``ln_1``/``ln_2`` as
  ``layer_norm1``/``layer_norm2``, ``mlp.c_fc``/``c_proj`` as ``mlp.fc1``/``fc2``; attention keeps q, k
  and v in one ``in_proj_weight`` (3*width rows: q, then k, then v) that transformers splits into
  ``q_proj``/``k_proj``/``v_proj``; ``text_projection`` is used as ``x @ P``, so transformers' linear
  weight is its transpose. SD 2.x conditions on the penultimate layer: diffusers' text encoder stops
  there, so the last resblock (and the projection) are left out.

Output names carry transformers' ``text_model.`` level, as the text encoders of the published
diffusers repositories do (``text_projection.weight`` for SDXL's second encoder).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from frame.convert.checkpoint.components import Take
from frame.convert.checkpoint.unet_keys import PARAM, UnknownKeys

CLIP_PART = re.compile(
    rf"embeddings\.(token_embedding|position_embedding)\.weight|final_layer_norm\.{PARAM}"
    rf"|encoder\.layers\.\d+\.(self_attn\.(q_proj|k_proj|v_proj|out_proj)\.{PARAM}|layer_norm[12]\.{PARAM}"
    rf"|mlp\.fc[12]\.{PARAM})")
CLIP_SKIPPED = ("embeddings.position_ids",)
RESBLOCK = re.compile(r"transformer\.resblocks\.(\d+)\.(.+)")
RESBLOCK_PART = {"ln_1": "layer_norm1", "ln_2": "layer_norm2", "mlp.c_fc": "mlp.fc1", "mlp.c_proj": "mlp.fc2",
                 "attn.out_proj": "self_attn.out_proj"}
OPEN_CLIP_TOP = {"positional_embedding": "text_model.embeddings.position_embedding.weight",
                 "token_embedding.weight": "text_model.embeddings.token_embedding.weight",
                 "ln_final.weight": "text_model.final_layer_norm.weight",
                 "ln_final.bias": "text_model.final_layer_norm.bias"}
OPEN_CLIP_SKIPPED = ("logit_scale", "attn_mask")


def clip_names(keys: Iterable[str], prefix: str) -> tuple[dict[str, Take], list[str]]:
    """``{diffusers key: Take}`` for a transformers-layout CLIP text model under ``prefix``, and the
    keys skipped (``position_ids``)."""
    out: dict[str, Take] = {}
    unknown, skipped = [], []
    for key in keys:
        rest = key[len(prefix):]
        inner = rest[len("text_model."):] if rest.startswith("text_model.") else rest
        if inner in CLIP_SKIPPED:
            skipped.append(key)
        elif CLIP_PART.fullmatch(inner):
            out[f"text_model.{inner}"] = Take(key)
        else:
            unknown.append(key)
    if unknown:
        raise UnknownKeys("text encoder", unknown)
    return out, skipped


def open_clip_names(shapes: dict[str, tuple[int, ...]], prefix: str, *, drop_last_layer: bool,
                    projection: bool) -> tuple[dict[str, Take], list[str]]:
    """``{diffusers key: Take}`` for an OpenCLIP text tower under ``prefix`` (keys → shapes), and the
    keys left out (the last resblock and the projection for SD 2.x, ``logit_scale``)."""
    layers = 1 + max((int(m.group(1)) for k in shapes if (m := RESBLOCK.fullmatch(k[len(prefix):]))), default=-1)
    last = layers - 1 if drop_last_layer else layers
    out: dict[str, Take] = {}
    unknown, skipped = [], []
    for key, shape in shapes.items():
        rest = key[len(prefix):]
        if rest in OPEN_CLIP_TOP:
            out[OPEN_CLIP_TOP[rest]] = Take(key)
        elif rest == "text_projection":
            if projection:
                out["text_projection.weight"] = Take(key, transpose=True)
            else:
                skipped.append(key)
        elif rest in OPEN_CLIP_SKIPPED:
            skipped.append(key)
        elif match := RESBLOCK.fullmatch(rest):
            layer, part = int(match.group(1)), match.group(2)
            if layer >= last:
                skipped.append(key)
                continue
            target = f"text_model.encoder.layers.{layer}."
            module, _, param = part.rpartition(".")
            if module in RESBLOCK_PART and param in ("weight", "bias"):
                out[f"{target}{RESBLOCK_PART[module]}.{param}"] = Take(key)
            elif part in ("attn.in_proj_weight", "attn.in_proj_bias") and shape and shape[0] % 3 == 0:
                width, param = shape[0] // 3, part.rsplit("_", 1)[1]
                for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
                    out[f"{target}self_attn.{name}.{param}"] = Take(key, rows=(i * width, (i + 1) * width))
            else:
                unknown.append(key)
        else:
            unknown.append(key)
    if unknown:
        raise UnknownKeys("text encoder", unknown)
    return out, skipped
