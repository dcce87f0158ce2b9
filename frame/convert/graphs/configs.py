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

# Caps on what a config may claim (a config.json is read from the owner's download): far above every SD
# model (widths ≤ 5120, 49408 tokens, 32 layers, 4 levels), low enough that a graph is built in seconds
# and no constant the builder makes (ones per group, frequencies per channel) is large.
MAX_WIDTH = 1 << 16
MAX_VOCAB = 1 << 20
MAX_DEPTH = 128
MAX_LEVELS = 8


def _tuple(value: Any, count: int, field: str, cap: int) -> tuple[int, ...]:
    """A per-block setting of positive integers up to ``cap``: a list of ``count``, or one for every block."""
    if isinstance(value, (list, tuple)):
        if len(value) != count:
            raise FrameError(f"config: {field} has {len(value)} entries for {count} blocks")
        values = tuple(value)
    else:
        values = (value,) * count
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= cap for v in values):
        raise FrameError(f"config: {field} must be positive integers up to {cap}, got {value!r}")
    return values


def _require(config: Mapping[str, Any], field: str, allowed: tuple, default: Any) -> Any:
    value = config.get(field, default)
    if value is None:
        value = default
    if value not in allowed:
        raise FrameError(f"config: {field}={value!r} is not supported (supported: "
                         f"{', '.join(repr(a) for a in allowed)})")
    return value


def _positive(config: Mapping[str, Any], field: str, default: Any = None, cap: int = MAX_WIDTH) -> int:
    value = config.get(field, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= cap:
        raise FrameError(f"config: {field} must be a positive integer up to {cap}, got {value!r}")
    return value


def _channels(config: Mapping[str, Any], field: str, default: Any) -> tuple[int, ...]:
    value = config.get(field, default)
    if not isinstance(value, (list, tuple)) or not 0 < len(value) <= MAX_LEVELS or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_WIDTH for v in value):
        raise FrameError(f"config: {field} must be a list of 1 to {MAX_LEVELS} positive integers up to "
                         f"{MAX_WIDTH}, got {value!r}")
    return tuple(value)


def _number(config: Mapping[str, Any], field: str, default: float, low: float, high: float) -> float:
    value = config.get(field, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise FrameError(f"config: {field} must be a number from {low} to {high}, got {value!r}")
    return float(value)


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
                   layers_per_block=_positive(config, "layers_per_block", 1, MAX_DEPTH),
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
        eps = _number(config, "layer_norm_eps", 1e-5, 1e-12, 1.0)
        eos = config.get("eos_token_id", 2)
        if not isinstance(eos, int):
            raise FrameError(f"config: eos_token_id must be an integer, got {eos!r}")
        return cls(vocab_size=_positive(config, "vocab_size", 49408, MAX_VOCAB), hidden_size=hidden,
                   intermediate_size=_positive(config, "intermediate_size", 2048),
                   num_hidden_layers=_positive(config, "num_hidden_layers", 12, MAX_DEPTH), num_attention_heads=heads,
                   max_position_embeddings=_positive(config, "max_position_embeddings", 77),
                   hidden_act=_require(config, "hidden_act", ("quick_gelu", "gelu"), "quick_gelu"),
                   layer_norm_eps=eps, projection_dim=_positive(config, "projection_dim", 512),
                   eos_token_id=eos, with_projection=bool(with_projection), hidden_states=bool(hidden_states))


DOWN_TYPES = ("CrossAttnDownBlock2D", "DownBlock2D")
UP_TYPES = ("CrossAttnUpBlock2D", "UpBlock2D")
# UNet2DConditionModel switches the builder implements only at their SD/SDXL values: (field, allowed, default)
_UNET_FIXED = (
    ("center_input_sample", (False,), False), ("only_cross_attention", (False,), False),
    ("dual_cross_attention", (False,), False), ("act_fn", ("silu",), "silu"),
    ("mid_block_type", ("UNetMidBlock2DCrossAttn",), "UNetMidBlock2DCrossAttn"),
    ("class_embed_type", (None,), None), ("num_class_embeds", (None,), None), ("encoder_hid_dim", (None,), None),
    ("encoder_hid_dim_type", (None,), None), ("addition_embed_type", (None, "text_time"), None),
    ("resnet_time_scale_shift", ("default",), "default"), ("resnet_skip_time_act", (False,), False),
    ("resnet_out_scale_factor", (1, 1.0), 1.0), ("mid_block_scale_factor", (1, 1.0), 1),
    ("time_embedding_type", ("positional",), "positional"), ("time_embedding_act_fn", (None,), None),
    ("timestep_post_act", (None,), None), ("conv_in_kernel", (3,), 3), ("conv_out_kernel", (3,), 3),
    ("attention_type", ("default",), "default"), ("class_embeddings_concat", (False,), False),
    ("mid_block_only_cross_attention", (None, False), None), ("cross_attention_norm", (None,), None),
    ("time_embedding_dim", (None,), None),
)


@dataclass(frozen=True)
class UNetConfig:
    """diffusers UNet2DConditionModel, per-block settings as tuples (SD 1.x, 2.x, SDXL, LCM's
    ``time_cond_proj_dim``)."""

    in_channels: int = 4
    out_channels: int = 4
    block_out_channels: tuple[int, ...] = (320, 640, 1280, 1280)
    down_block_types: tuple[str, ...] = ("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",)
    up_block_types: tuple[str, ...] = ("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3
    layers_per_block: tuple[int, ...] = (2, 2, 2, 2)
    transformer_layers_per_block: tuple[int, ...] = (1, 1, 1, 1)
    reverse_transformer_layers_per_block: tuple[int, ...] | None = None
    num_attention_heads: tuple[int, ...] = (8, 8, 8, 8)
    cross_attention_dim: int = 1280
    use_linear_projection: bool = False
    norm_num_groups: int = 32
    norm_eps: float = 1e-5
    flip_sin_to_cos: bool = True
    freq_shift: float = 0
    downsample_padding: int = 1
    text_time: bool = False  # addition_embed_type: text_time (SDXL)
    addition_time_embed_dim: int = 0
    projection_class_embeddings_input_dim: int = 0
    time_cond_proj_dim: int | None = None

    @property
    def time_embed_dim(self) -> int:
        return self.block_out_channels[0] * 4

    @property
    def text_embeds_dim(self) -> int:
        """The pooled text embedding's width SDXL's UNet takes (its input minus six time ids)."""
        return self.projection_class_embeddings_input_dim - 6 * self.addition_time_embed_dim

    @classmethod
    def from_diffusers(cls, config: Mapping[str, Any]) -> UNetConfig:
        for field, allowed, default in _UNET_FIXED:
            _require(config, field, allowed, default)
        blocks = _channels(config, "block_out_channels", [320, 640, 1280, 1280])
        n = len(blocks)
        down = tuple(config.get("down_block_types", cls.down_block_types))
        up = tuple(config.get("up_block_types", cls.up_block_types))
        if len(down) != n or len(up) != n or any(t not in DOWN_TYPES for t in down) or any(
                t not in UP_TYPES for t in up):
            raise FrameError(f"config: block types {list(down)} / {list(up)} are not supported (one of "
                             f"{', '.join(DOWN_TYPES)} down and {', '.join(UP_TYPES)} up per block)")
        heads = config.get("num_attention_heads") or config.get("attention_head_dim", 8)  # diffusers' legacy name
        heads = _tuple(heads, n, "num_attention_heads", MAX_WIDTH)
        layers = _tuple(config.get("layers_per_block", 2), n, "layers_per_block", MAX_DEPTH)
        transformer = _tuple(config.get("transformer_layers_per_block", 1), n, "transformer_layers_per_block",
                             MAX_DEPTH)
        reverse = config.get("reverse_transformer_layers_per_block")
        if reverse is not None:
            raise FrameError("config: reverse_transformer_layers_per_block is not supported")
        for i, (width, h) in enumerate(zip(blocks, heads)):
            if width % h and down[i] == "CrossAttnDownBlock2D":
                raise FrameError(f"config: block {i}'s {width} channels do not split into {h} attention heads")
        cross = config.get("cross_attention_dim", 1280)
        if isinstance(cross, (list, tuple)):
            if len(set(cross)) != 1:
                raise FrameError(f"config: a cross_attention_dim per block ({list(cross)}) is not supported")
            cross = cross[0]
        text_time = config.get("addition_embed_type") == "text_time"
        cond = config.get("time_cond_proj_dim")
        eps = _number(config, "norm_eps", 1e-5, 1e-12, 1.0)
        if text_time and _positive(config, "projection_class_embeddings_input_dim") <= 6 * _positive(
                config, "addition_time_embed_dim"):
            raise FrameError("config: projection_class_embeddings_input_dim leaves no room for text_embeds beside "
                             "six time ids of addition_time_embed_dim")
        return cls(
            in_channels=_positive(config, "in_channels", 4), out_channels=_positive(config, "out_channels", 4),
            block_out_channels=blocks, down_block_types=down, up_block_types=up, layers_per_block=layers,
            transformer_layers_per_block=transformer, num_attention_heads=heads,
            cross_attention_dim=_positive({"cross_attention_dim": cross}, "cross_attention_dim"),
            use_linear_projection=bool(config.get("use_linear_projection", False)),
            norm_num_groups=_positive(config, "norm_num_groups", 32), norm_eps=eps,
            flip_sin_to_cos=bool(config.get("flip_sin_to_cos", True)),
            freq_shift=_number(config, "freq_shift", 0, 0, 1),
            downsample_padding=_require(config, "downsample_padding", (0, 1), 1), text_time=text_time,
            addition_time_embed_dim=_positive(config, "addition_time_embed_dim") if text_time else 0,
            projection_class_embeddings_input_dim=_positive(config, "projection_class_embeddings_input_dim")
            if text_time else 0,
            time_cond_proj_dim=None if cond is None else _positive(config, "time_cond_proj_dim"))
