"""The VAE of an original checkpoint (or a standalone VAE file) under diffusers' AutoencoderKL names.

Original names (``first_stage_model.`` in a checkpoint, none in ``vae-ft-mse-840000``-style files):
``encoder.down.L.block.I`` / ``encoder.down.L.downsample.conv``, ``{en,de}coder.mid.block_1|2`` and
``mid.attn_1`` (q, k, v, proj_out as 1x1 convolutions), ``decoder.up.L.block.I`` with the decoder's
levels numbered from the *lowest* resolution in diffusers but from the highest in the original
(``decoder.up.0`` is diffusers' last ``up_blocks``). ``nin_shortcut`` is ``conv_shortcut``,
``norm_out`` is ``conv_norm_out``. The attention's 1x1 convolution weights become linear weights
(``[:, :, 0, 0]``, ``squeeze``).

A VAE already in diffusers' names (``sdxl-vae-fp16-fix``'s ``diffusion_pytorch_model.safetensors``)
maps to itself, with the names diffusers used before 0.15 (``query``, ``key``, ``value``,
``proj_attn``) renamed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from frame.convert.checkpoint.unet_keys import PARAM, rename_all

RESNET_PART = rf"(norm1|conv1|norm2|conv2)\.{PARAM}"
ATTENTION = {"norm": "group_norm", "q": "to_q", "k": "to_k", "v": "to_v", "proj_out": "to_out.0"}
OLD_DIFFUSERS_ATTENTION = {"query": "to_q", "key": "to_k", "value": "to_v", "proj_attn": "to_out.0"}
PLAIN = {"encoder.conv_in", "encoder.conv_out", "decoder.conv_in", "decoder.conv_out", "quant_conv",
         "post_quant_conv"}
ORIGINAL = re.compile(
    rf"(encoder|decoder)\.(down|up)\.(\d+)\.(block\.(\d+)\.(.+)|(downsample|upsample)\.conv\.{PARAM})")
MID = re.compile(r"(encoder|decoder)\.mid\.(block_1|block_2|attn_1)\.(.+)")
DIFFUSERS = re.compile(
    rf"(encoder|decoder)\.((down|up)_blocks\.\d+\.(resnets\.\d+\.({RESNET_PART}|conv_shortcut\.{PARAM})"
    rf"|(downsamplers|upsamplers)\.0\.conv\.{PARAM})"
    rf"|mid_block\.(resnets\.[01]\.({RESNET_PART}|conv_shortcut\.{PARAM})|attentions\.0\.(\w+(\.0)?)\.{PARAM})"
    rf"|conv_norm_out\.{PARAM}|conv_in\.{PARAM}|conv_out\.{PARAM})|(quant_conv|post_quant_conv)\.{PARAM}")


def is_diffusers_vae(keys: Iterable[str]) -> bool:
    return any(".down_blocks." in k or ".up_blocks." in k for k in keys)


def _resnet(rest: str) -> str | None:
    if re.fullmatch(RESNET_PART, rest):
        return rest
    if rest.startswith("nin_shortcut.") and re.fullmatch(PARAM, rest[len("nin_shortcut."):]):
        return "conv_shortcut." + rest[len("nin_shortcut."):]
    return None


def original_name(key: str, up_levels: int) -> tuple[str, bool] | None:
    """(diffusers name, whether the weight is a 1x1 conv to squeeze) of an original VAE key."""
    stem, _, param = key.rpartition(".")
    if stem in PLAIN and param in ("weight", "bias"):
        return key, False
    for part in ("encoder", "decoder"):
        if stem == f"{part}.norm_out" and param in ("weight", "bias"):
            return f"{part}.conv_norm_out.{param}", False
    if match := ORIGINAL.fullmatch(key):
        part, direction, level = match.group(1), match.group(2), int(match.group(3))
        if (part, direction) not in (("encoder", "down"), ("decoder", "up")):
            return None
        target = level if part == "encoder" else up_levels - 1 - level
        if target < 0:
            return None
        blocks = f"{part}.{direction}_blocks.{target}"
        if match.group(7):
            return f"{blocks}.{direction}samplers.0.conv.{match.group(8)}", False
        if (name := _resnet(match.group(6))) is not None:
            return f"{blocks}.resnets.{match.group(5)}.{name}", False
        return None
    if match := MID.fullmatch(key):
        part, block, rest = match.groups()
        if block != "attn_1":
            name = _resnet(rest)
            return (f"{part}.mid_block.resnets.{int(block[-1]) - 1}.{name}", False) if name else None
        module, _, param = rest.partition(".")
        if module in ATTENTION and param in ("weight", "bias"):
            return f"{part}.mid_block.attentions.0.{ATTENTION[module]}.{param}", param == "weight" and module != "norm"
    return None


def diffusers_name(key: str) -> tuple[str, bool] | None:
    """A diffusers-layout VAE key as today's diffusers names it (old attention names renamed; a
    weight stored as a 1x1 conv is squeezed by the caller when its shape says so)."""
    if not DIFFUSERS.fullmatch(key):
        return None
    head, sep, tail = key.partition(".mid_block.attentions.0.")
    if sep:
        module, _, param = tail.rpartition(".")
        module = OLD_DIFFUSERS_ATTENTION.get(module, module)
        if module not in ("group_norm", "to_q", "to_k", "to_v", "to_out.0"):
            return None
        return f"{head}{sep}{module}.{param}", False
    return key, False


def vae_names(keys: Iterable[str]) -> dict[str, tuple[str, bool]]:
    """``{key: (diffusers key, squeeze)}`` for every VAE key (prefix removed); ``UnknownKeys`` otherwise."""
    keys = list(keys)
    up_levels = 1 + max((int(m.group(3)) for k in keys if (m := ORIGINAL.fullmatch(k)) and m.group(1) == "decoder"),
                        default=-1)
    diffusers = is_diffusers_vae(keys)
    return rename_all(keys, lambda key: diffusers_name(key) if diffusers else original_name(key, up_levels), "VAE")
