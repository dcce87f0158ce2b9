"""UNet2DConditionModel as the graph optimum exports: ``sample``, ``timestep`` (float32, [steps]: one
value for the whole batch or one per item), ``encoder_hidden_states`` (+ SDXL's ``text_embeds`` and
``time_ids``, LCM's ``timestep_cond``) → ``out_sample``.

The structure follows ``UNet2DConditionModel.__init__`` and ``forward`` (diffusers
``models/unets/unet_2d_condition.py`` and ``unet_2d_blocks.py``): the time embedding (sinusoidal
projection, then the MLP; SDXL adds the projected pooled text and time ids), conv_in, the down
blocks keeping every resnet/transformer output and downsampling for the skips, the mid block, the up
blocks concatenating the skips back in reverse, and the norm/SiLU/conv_out tail. Heights and widths
are dynamic and must be multiples of 2^(blocks - 1) latent pixels (SD's 8 image pixels times that),
as with optimum's exports; diffusers' own odd-size upsampling is not built.
"""

from __future__ import annotations

import onnx

from frame.convert.graphs import blocks as B
from frame.convert.graphs import layers as L
from frame.convert.graphs.builder import FLOAT, GraphBuilder
from frame.convert.graphs.configs import UNetConfig
from frame.convert.graphs.transformer import Context, transformer_2d


def _time_embedding(g: GraphBuilder, cfg: UNetConfig, sample: str) -> str:
    """SiLU(emb), what every resnet's ``time_emb_proj`` reads: emb = time_embedding(time_proj(t))
    [+ add_embedding(text_embeds, time_proj(time_ids))]."""
    t = g.input("timestep", FLOAT, ["steps"])
    t = g.op("Expand", [t, L.batch_of(g, sample)], "timesteps")  # timesteps.expand(sample.shape[0])
    width, embed = cfg.block_out_channels[0], cfg.time_embed_dim
    projected = B.sinusoidal(g, t, width, cfg.flip_sin_to_cos, cfg.freq_shift, "time_proj")
    if cfg.time_cond_proj_dim is not None:
        cond = g.input("timestep_cond", FLOAT, ["batch_size", cfg.time_cond_proj_dim])
        extra = L.linear(g, cond, "time_embedding.cond_proj", cfg.time_cond_proj_dim, width, bias=False)
        projected = g.op("Add", [projected, extra], "time_proj/with_cond")
    emb = B.timestep_mlp(g, projected, "time_embedding", width, embed)
    if cfg.text_time:
        text = g.input("text_embeds", FLOAT, ["batch_size", cfg.text_embeds_dim])
        ids = g.input("time_ids", FLOAT, ["batch_size", 6])
        flat = g.op("Reshape", [ids, g.ints([-1])], "time_ids/flat")
        times = B.sinusoidal(g, flat, cfg.addition_time_embed_dim, cfg.flip_sin_to_cos, cfg.freq_shift,
                             "add_time_proj")
        times = g.op("Reshape", [times, g.ints([-1, 6 * cfg.addition_time_embed_dim])], "add_time_proj/rows")
        added = g.op("Concat", [text, times], "add_embeds", axis=-1)
        aug = B.timestep_mlp(g, added, "add_embedding", cfg.projection_class_embeddings_input_dim, embed)
        emb = g.op("Add", [emb, aug], "time_embedding/with_added")
    return L.silu(g, emb, "time_embedding/out")


class _UNet:
    """One build: the shared values (time embedding, text context) and the block walkers."""

    def __init__(self, g: GraphBuilder, cfg: UNetConfig, temb: str, context: Context) -> None:
        self.g, self.cfg, self.temb, self.context = g, cfg, temb, context

    def resnet(self, x: str, prefix: str, cin: int, cout: int) -> str:
        return B.resnet(self.g, x, prefix, cin, cout, self.cfg.norm_num_groups, self.cfg.norm_eps, self.temb,
                        self.cfg.time_embed_dim)

    def attention(self, x: str, prefix: str, channels: int, block: int) -> str:
        cfg = self.cfg
        return transformer_2d(self.g, x, prefix, channels, cfg.num_attention_heads[block],
                              cfg.transformer_layers_per_block[block], cfg.norm_num_groups,
                              cfg.use_linear_projection, self.context)

    def down(self, x: str) -> tuple[str, list[tuple[str, int]]]:
        """The down blocks; returns the output and the skips with their channel counts."""
        cfg = self.cfg
        skips = [(x, cfg.block_out_channels[0])]
        cin = cfg.block_out_channels[0]
        for i, (kind, cout) in enumerate(zip(cfg.down_block_types, cfg.block_out_channels)):
            for j in range(cfg.layers_per_block[i]):
                x = self.resnet(x, f"down_blocks.{i}.resnets.{j}", cin, cout)
                if kind == "CrossAttnDownBlock2D":
                    x = self.attention(x, f"down_blocks.{i}.attentions.{j}", cout, i)
                skips.append((x, cout))
                cin = cout
            if i < len(cfg.block_out_channels) - 1:
                x = L.downsample(self.g, x, f"down_blocks.{i}.downsamplers.0", cout, cfg.downsample_padding)
                skips.append((x, cout))
        return x, skips

    def mid(self, x: str) -> str:
        channels, last = self.cfg.block_out_channels[-1], len(self.cfg.block_out_channels) - 1
        x = self.resnet(x, "mid_block.resnets.0", channels, channels)
        x = self.attention(x, "mid_block.attentions.0", channels, last)
        return self.resnet(x, "mid_block.resnets.1", channels, channels)

    def up(self, x: str, skips: list[tuple[str, int]]) -> str:
        cfg = self.cfg
        n = len(cfg.block_out_channels)
        channels = list(reversed(cfg.block_out_channels))
        layers = list(reversed(cfg.layers_per_block))
        blocks = list(reversed(range(n)))  # the down block whose heads and depth up block i mirrors
        cin = channels[0]
        for i, (kind, cout) in enumerate(zip(cfg.up_block_types, channels)):
            for j in range(layers[i] + 1):
                skip, skip_channels = skips.pop()
                x = self.g.op("Concat", [x, skip], f"up_blocks.{i}.resnets.{j}/with_skip", axis=1)
                x = self.resnet(x, f"up_blocks.{i}.resnets.{j}", cin + skip_channels, cout)
                if kind == "CrossAttnUpBlock2D":
                    x = self.attention(x, f"up_blocks.{i}.attentions.{j}", cout, blocks[i])
                cin = cout
            if i < n - 1:
                x = L.upsample(self.g, x, f"up_blocks.{i}.upsamplers.0", cout)
        return x


def build_unet(cfg: UNetConfig) -> onnx.ModelProto:
    """The UNet graph (see the module docstring for inputs and outputs)."""
    g = GraphBuilder("unet")
    sample = g.input("sample", FLOAT, ["batch_size", cfg.in_channels, "height", "width"])
    temb = _time_embedding(g, cfg, sample)
    states = g.input("encoder_hidden_states", FLOAT, ["batch_size", "sequence_length", cfg.cross_attention_dim])
    context = Context(L.batch_of(g, sample),
                      g.op("Reshape", [states, g.ints([-1, cfg.cross_attention_dim])], "encoder_hidden_states/tokens"),
                      cfg.cross_attention_dim)
    net = _UNet(g, cfg, temb, context)
    first = cfg.block_out_channels[0]
    x = L.conv2d(g, sample, "conv_in", cfg.in_channels, first, 3)
    x, skips = net.down(x)
    x = net.up(net.mid(x), skips)
    x = L.group_norm(g, x, "conv_norm_out", first, cfg.norm_num_groups, cfg.norm_eps)
    x = L.conv2d(g, L.silu(g, x, "conv_norm_out"), "conv_out", first, cfg.out_channels, 3)
    g.output(x, "out_sample", FLOAT, ["batch_size", cfg.out_channels, "height", "width"])
    return g.model("UNet2DConditionModel (frame.convert.graphs)")
