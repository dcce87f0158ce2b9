"""What a graph is built for: the component's config.json, read into a frozen dataclass.

``from_diffusers`` / ``from_transformers`` take the dict of a diffusers or transformers config.json
(written by ``save_pretrained`` or by the importer from the detected architecture), fill the library
defaults for absent keys, and refuse, with one line naming the field, any value the builders do not
implement (a graph that silently ignored ``resnet_time_scale_shift: scale_shift`` would paint noise).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frame.errors import FrameError


def _tuple(value: Any, count: int, field: str) -> tuple:
    """A per-block setting: a list of ``count``, or one value for every block."""
    if isinstance(value, (list, tuple)):
        if len(value) != count:
            raise FrameError(f"config: {field} has {len(value)} entries for {count} blocks")
        return tuple(value)
    return (value,) * count


def _require(config: Mapping[str, Any], field: str, allowed: tuple, default: Any) -> Any:
    value = config.get(field, default)
    if value is None:
        value = default
    if value not in allowed:
        raise FrameError(f"config: {field}={value!r} is not supported (supported: "
                         f"{', '.join(repr(a) for a in allowed)})")
    return value


def _positive(config: Mapping[str, Any], field: str, default: Any = None) -> int:
    value = config.get(field, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise FrameError(f"config: {field} must be a positive integer, got {value!r}")
    return value


def _channels(config: Mapping[str, Any], field: str, default: Any) -> tuple[int, ...]:
    value = config.get(field, default)
    if not isinstance(value, (list, tuple)) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
        raise FrameError(f"config: {field} must be a list of positive integers, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class VaeConfig:
    """diffusers AutoencoderKL."""

    in_channels: int = 3
    out_channels: int = 3
    latent_channels: int = 4
    block_out_channels: tuple[int, ...] = (64,)
    layers_per_block: int = 1
    norm_num_groups: int = 32
    act_fn: str = "silu"
    mid_block_add_attention: bool = True
    use_quant_conv: bool = True
    use_post_quant_conv: bool = True

    @classmethod
    def from_diffusers(cls, config: Mapping[str, Any]) -> VaeConfig:
        blocks = _channels(config, "block_out_channels", [64])
        down = config.get("down_block_types", ["DownEncoderBlock2D"] * len(blocks))
        up = config.get("up_block_types", ["UpDecoderBlock2D"] * len(blocks))
        if list(down) != ["DownEncoderBlock2D"] * len(blocks) or list(up) != ["UpDecoderBlock2D"] * len(blocks):
            raise FrameError(f"config: the VAE's block types {list(down)} / {list(up)} are not supported "
                             "(one DownEncoderBlock2D and UpDecoderBlock2D per block_out_channels entry)")
        _require(config, "act_fn", ("silu",), "silu")
        _require(config, "norm_type", ("group",), "group")
        return cls(in_channels=_positive(config, "in_channels", 3), out_channels=_positive(config, "out_channels", 3),
                   latent_channels=_positive(config, "latent_channels", 4), block_out_channels=blocks,
                   layers_per_block=_positive(config, "layers_per_block", 1),
                   norm_num_groups=_positive(config, "norm_num_groups", 32),
                   mid_block_add_attention=bool(config.get("mid_block_add_attention", True)),
                   use_quant_conv=bool(config.get("use_quant_conv", True)),
                   use_post_quant_conv=bool(config.get("use_post_quant_conv", True)))


@dataclass(frozen=True)
class TextEncoderConfig:
    """transformers CLIPTextConfig; ``with_projection``: CLIPTextModelWithProjection (``text_embeds``);
    ``hidden_states``: also output every layer's hidden state (``hidden_states.0`` … ``.N``, SDXL's
    penultimate-layer conditioning)."""

    vocab_size: int = 49408
    hidden_size: int = 512
    intermediate_size: int = 2048
    num_hidden_layers: int = 12
    num_attention_heads: int = 8
    max_position_embeddings: int = 77
    hidden_act: str = "quick_gelu"
    layer_norm_eps: float = 1e-5
    projection_dim: int = 512
    eos_token_id: int = 2
    with_projection: bool = False
    hidden_states: bool = False

    @classmethod
    def from_transformers(cls, config: Mapping[str, Any], with_projection: bool | None = None,
                          hidden_states: bool | None = None) -> TextEncoderConfig:
        """``with_projection`` None: from ``architectures`` (CLIPTextModelWithProjection); ``hidden_states``
        None: from ``output_hidden_states``, else True for a projected (SDXL second) encoder."""
        if with_projection is None:
            with_projection = "CLIPTextModelWithProjection" in (config.get("architectures") or ())
        if hidden_states is None:
            hidden_states = bool(config.get("output_hidden_states", False)) or with_projection
        hidden, heads = _positive(config, "hidden_size", 512), _positive(config, "num_attention_heads", 8)
        if hidden % heads:
            raise FrameError(f"config: hidden_size {hidden} does not split into {heads} attention heads")
        eps = config.get("layer_norm_eps", 1e-5)
        if not isinstance(eps, (int, float)) or eps <= 0:
            raise FrameError(f"config: layer_norm_eps must be a positive number, got {eps!r}")
        eos = config.get("eos_token_id", 2)
        if not isinstance(eos, int):
            raise FrameError(f"config: eos_token_id must be an integer, got {eos!r}")
        return cls(vocab_size=_positive(config, "vocab_size", 49408), hidden_size=hidden,
                   intermediate_size=_positive(config, "intermediate_size", 2048),
                   num_hidden_layers=_positive(config, "num_hidden_layers", 12), num_attention_heads=heads,
                   max_position_embeddings=_positive(config, "max_position_embeddings", 77),
                   hidden_act=_require(config, "hidden_act", ("quick_gelu", "gelu"), "quick_gelu"),
                   layer_norm_eps=float(eps), projection_dim=_positive(config, "projection_dim", 512),
                   eos_token_id=eos, with_projection=bool(with_projection), hidden_states=bool(hidden_states))
