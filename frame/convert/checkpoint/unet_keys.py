"""The UNet of an original (CompVis/Stability "LDM"/"SGM") checkpoint under diffusers' names.

The original UNet is a flat list of blocks: ``input_blocks.0`` is the first convolution, then each
resolution level has ``layers`` blocks of a ResBlock (``.0``) optionally followed by a transformer
(``.1``), and every level but the last ends with a downsampler block (``.0.op``). ``middle_block`` is
ResBlock, transformer, ResBlock; ``output_blocks`` mirror the levels with ``layers + 1`` blocks each,
the last block of a level carrying the upsampler (``.1.conv`` after a plain ResBlock, ``.2.conv`` after
a transformer). diffusers groups the same tensors by level (``down_blocks.L.resnets.I``...). The
transformers' own tensor names are the same in both (``transformer_blocks.0.attn1.to_q.weight``...);
the ResBlocks' differ (``in_layers.0`` is ``norm1``...).

The mapping is read off the keys themselves (how many levels, how many blocks per level), so it holds
for any width or depth, and a key it does not know is reported instead of guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

RESNET = (("in_layers.0.", "norm1."), ("in_layers.2.", "conv1."), ("out_layers.0.", "norm2."),
          ("out_layers.3.", "conv2."), ("emb_layers.1.", "time_emb_proj."), ("skip_connection.", "conv_shortcut."))
TOP = (("time_embed.0.", "time_embedding.linear_1."), ("time_embed.2.", "time_embedding.linear_2."),
       ("label_emb.0.0.", "add_embedding.linear_1."), ("label_emb.0.2.", "add_embedding.linear_2."),
       ("input_blocks.0.0.", "conv_in."), ("out.0.", "conv_norm_out."), ("out.2.", "conv_out."))
PARAM = r"(weight|bias)"
TRANSFORMER = re.compile(
    rf"(norm|proj_in|proj_out)\.{PARAM}"
    rf"|transformer_blocks\.\d+\.(norm[123]\.{PARAM}|attn[12]\.to_[qkv]\.weight|attn[12]\.to_out\.0\.{PARAM}"
    rf"|ff\.net\.0\.proj\.{PARAM}|ff\.net\.2\.{PARAM})")
BLOCK = re.compile(r"(input_blocks|output_blocks)\.(\d+)\.(\d+)\.(.+)")
MIDDLE = re.compile(r"middle_block\.(\d)\.(.+)")
Name = TypeVar("Name")  # what a key is renamed to (a diffusers key; for the VAE with its squeeze flag)


@dataclass(frozen=True)
class UNetLayout:
    """The level structure read from the keys: ``levels`` resolutions of ``layers`` ResBlocks each."""

    levels: int
    layers: int

    def down_level(self, block: int) -> tuple[int, int]:
        """(level, index in level) of ``input_blocks.<block>`` (block >= 1)."""
        return divmod(block - 1, self.layers + 1)

    def up_level(self, block: int) -> tuple[int, int]:
        return divmod(block, self.layers + 1)


class UnknownKeys(ValueError):
    """Keys that are not part of the layout being mapped (listed, a few at a time, in the message)."""

    def __init__(self, what: str, keys: list[str]) -> None:
        self.keys = keys
        shown = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
        super().__init__(f"{len(keys)} {what} key(s) frame does not know: {shown}")


def rename_all(keys: Iterable[str], rename: Callable[[str], Name | None], what: str) -> dict[str, Name]:
    """``{key: rename(key)}`` for every key; ``UnknownKeys`` (of the ``what`` part) lists the keys
    ``rename`` has no name for."""
    names, unknown = {}, []
    for key in keys:
        name = rename(key)
        if name is None:
            unknown.append(key)
        else:
            names[key] = name
    if unknown:
        raise UnknownKeys(what, unknown)
    return names


def layout(keys: Iterable[str]) -> UNetLayout:
    """Levels and ResBlocks per level, from the input blocks (``ValueError`` if they do not add up)."""
    blocks, downsamplers = set(), set()
    for key in keys:
        match = BLOCK.fullmatch(key)
        if match and match.group(1) == "input_blocks":
            blocks.add(int(match.group(2)))
            if match.group(3) == "0" and match.group(4).startswith("op."):
                downsamplers.add(int(match.group(2)))
    if not blocks or min(blocks) != 0 or sorted(blocks) != list(range(max(blocks) + 1)):
        raise ValueError("the UNet's input_blocks are not numbered 0..N")
    levels = len(downsamplers) + 1
    layers, rest = divmod(max(blocks) - len(downsamplers), levels)
    if rest or layers < 1 or downsamplers != {(layers + 1) * (k + 1) for k in range(levels - 1)}:
        raise ValueError(f"the UNet's {max(blocks)} input blocks and {len(downsamplers)} downsamplers do not "
                         "form equal levels")
    return UNetLayout(levels, layers)


def _resnet(rest: str) -> str | None:
    for old, new in RESNET:
        if rest.startswith(old) and re.fullmatch(PARAM, rest[len(old):]):
            return new + rest[len(old):]
    return None


def _attention(rest: str) -> str | None:
    return rest if TRANSFORMER.fullmatch(rest) else None


def _block(shape: UNetLayout, kind: str, block: int, slot: int, rest: str) -> str | None:
    if kind == "input_blocks":
        level, index = shape.down_level(block)
        if slot == 0 and rest.startswith("op.") and re.fullmatch(PARAM, rest[3:]):
            return f"down_blocks.{level}.downsamplers.0.conv.{rest[3:]}"
        if slot == 0 and (name := _resnet(rest)):
            return f"down_blocks.{level}.resnets.{index}.{name}"
        if slot == 1 and (name := _attention(rest)):
            return f"down_blocks.{level}.attentions.{index}.{name}"
        return None
    level, index = shape.up_level(block)
    if slot > 0 and rest.startswith("conv.") and re.fullmatch(PARAM, rest[5:]):
        return f"up_blocks.{level}.upsamplers.0.conv.{rest[5:]}"
    if slot == 0 and (name := _resnet(rest)):
        return f"up_blocks.{level}.resnets.{index}.{name}"
    if slot == 1 and (name := _attention(rest)):
        return f"up_blocks.{level}.attentions.{index}.{name}"
    return None


def unet_name(shape: UNetLayout, key: str) -> str | None:
    """The diffusers name of one original UNet key (prefix already removed), None if unknown."""
    for old, new in TOP:
        if key.startswith(old) and re.fullmatch(PARAM, key[len(old):]):
            return new + key[len(old):]
    if match := BLOCK.fullmatch(key):
        kind, block, slot, rest = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
        if kind == "input_blocks" and block == 0:
            return None
        return _block(shape, kind, block, slot, rest)
    if match := MIDDLE.fullmatch(key):
        slot, rest = int(match.group(1)), match.group(2)
        if slot in (0, 2) and (name := _resnet(rest)):
            return f"mid_block.resnets.{slot // 2}.{name}"
        if slot == 1 and (name := _attention(rest)):
            return f"mid_block.attentions.0.{name}"
    return None


def unet_names(keys: Iterable[str]) -> tuple[UNetLayout, dict[str, str]]:
    """The layout and ``{original key: diffusers key}`` for every UNet key (prefix removed);
    ``UnknownKeys`` lists those that fit no part of the layout (``ValueError`` if the blocks do not
    form levels at all)."""
    keys = list(keys)
    shape = layout(keys)
    return shape, rename_all(keys, lambda key: unet_name(shape, key), "UNet")
