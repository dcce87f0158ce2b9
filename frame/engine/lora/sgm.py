"""kohya's SDXL module names (sd-scripts writes the original SGM UNet's blocks) as diffusers' names.

sd-scripts names SDXL UNet layers after Stability's SGM code: ``input_blocks_4_1_transformer_blocks_0_
attn1_to_q``, ``middle_block_1_…``, ``output_blocks_2_2_conv``, resnets' ``in_layers_2`` / ``out_layers_3``
/ ``emb_layers_1`` / ``skip_connection``. An ONNX export from diffusers names the same layers
``down_blocks_1_attentions_1_…``. The blocks follow from ``layers_per_block`` (2 for SDXL; read from
the export's own names): input block ``i ≥ 1`` is down block ``(i-1) // (lpb+1)``, item ``(i-1) % (lpb+1)``
(the last item of a block is its downsampler); output block ``i`` is up block ``i // (lpb+1)``; the
middle block is resnet, attention, resnet. diffusers does the same in ``_maybe_map_sgm_blocks_to_diffusers``
and ``_convert_unet_lora_key``.
"""

from __future__ import annotations

import re

_RESNET = (("in_layers_2", "conv1"), ("out_layers_3", "conv2"), ("emb_layers_1", "time_emb_proj"),
           ("skip_connection", "conv_shortcut"))
_FIXED = {"time_embed_0": "time_embedding_linear_1", "time_embed_2": "time_embedding_linear_2",
          "label_emb_0_0": "add_embedding_linear_1", "label_emb_0_2": "add_embedding_linear_2",
          "input_blocks_0_0": "conv_in", "out_2": "conv_out"}


def _resnet(rest: str) -> str:
    for sgm, diffusers in _RESNET:
        if rest == sgm:
            return diffusers
    return rest


def is_sgm(key: str) -> bool:
    return key.startswith(("input_blocks_", "middle_block_", "output_blocks_", "time_embed_", "label_emb_", "out_"))


def candidates(key: str, layers_per_block: int) -> list[str]:
    """The diffusers names an SGM-named UNet module may have (first that exists wins), or []."""
    if key in _FIXED:
        return [_FIXED[key]]
    per = layers_per_block + 1
    if m := re.fullmatch(r"input_blocks_(\d+)_(\d+)_(.+)", key):
        i, j, rest = int(m[1]), int(m[2]), m[3]
        block, item = divmod(i - 1, per)
        if i == 0:
            return []
        if item == layers_per_block:
            return [f"down_blocks_{block}_downsamplers_0_conv"] if rest == "op" else []
        return [f"down_blocks_{block}_resnets_{item}_{_resnet(rest)}" if j == 0
                else f"down_blocks_{block}_attentions_{item}_{rest}"]
    if m := re.fullmatch(r"middle_block_(\d)_(.+)", key):
        j, rest = int(m[1]), m[2]
        return [{0: f"mid_block_resnets_0_{_resnet(rest)}", 1: f"mid_block_attentions_0_{rest}",
                 2: f"mid_block_resnets_1_{_resnet(rest)}"}.get(j, "")] if j in (0, 1, 2) else []
    if m := re.fullmatch(r"output_blocks_(\d+)_(\d+)_(.+)", key):
        i, j, rest = int(m[1]), int(m[2]), m[3]
        block, item = divmod(i, per)
        if j == 0:
            return [f"up_blocks_{block}_resnets_{item}_{_resnet(rest)}"]
        upsampler = [f"up_blocks_{block}_upsamplers_0_conv"] if rest == "conv" else []
        return ([f"up_blocks_{block}_attentions_{item}_{rest}"] if j == 1 else []) + upsampler
    return []
