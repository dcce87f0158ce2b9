"""LoRA applied as each weight streams: W + scale·(alpha/rank)·up·down, decoded in the op, never merged on disk.

``files`` reads kohya/A1111 and diffusers/PEFT LoRA safetensors into modules per component;
``values`` reads every factor once, streaming, to refuse NaN/inf before a render trusts the file;
``matching`` finds the ONNX initializer each module changes from the graph's node names (torch export
renames MatMul weights ``onnx::MatMul_1234`` and stores them transposed); ``delta`` computes a
module's change for a block of a weight's channels; ``provider`` hands the engine each changed weight
(a merged float32 copy of a float32 weight, the stored 8-bit/fp16 weight with its delta otherwise,
which ``weight_decoding.decode_block`` adds block by block).
"""

from frame.engine.lora.delta import LoraStored, WeightDelta
from frame.engine.lora.files import LoraFile, LoraModule, read_lora
from frame.engine.lora.matching import LoraUse, MatchReport, match_loras
from frame.engine.lora.values import check_values, read_checked

__all__ = ["LoraFile", "LoraModule", "LoraStored", "LoraUse", "MatchReport", "WeightDelta", "check_values",
           "match_loras", "read_checked", "read_lora"]
