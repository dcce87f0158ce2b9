"""CLIP's text transformer (transformers' CLIPTextModel / CLIPTextModelWithProjection) as the graph
optimum exports: ``input_ids`` (int32, batch × sequence) → ``last_hidden_state`` and ``pooler_output``,
or ``text_embeds`` and ``last_hidden_state`` with the projection, then ``hidden_states.0`` … ``.N`` when
the config asks (SDXL conditions on the penultimate one).

The sequence axis is dynamic: frame runs a prompt only through its end-of-text token
(``frame.diffusion.conditioning.through_end_of_text``), so the position embeddings are the table's
first T rows and the causal mask is built for T. The token lookup is a ``Gather`` straight on
``input_ids``, the node ``Model.token_table`` finds for textual-inversion embeddings. Covers SD 1.x's
OpenAI ViT-L (quick_gelu), SD 2.x's OpenCLIP ViT-H and SDXL's bigG (gelu, bigG with its projection).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from frame.convert.graphs import layers as L
from frame.convert.graphs.builder import FLOAT, GraphBuilder
from frame.convert.graphs.configs import TextEncoderConfig

INT32 = TensorProto.INT32
MASKED = float(np.finfo(np.float32).min)  # transformers' causal mask value


def _causal_mask(g: GraphBuilder, ids: str) -> str:
    """(T, T): 0 on and below the diagonal, float32's lowest above it (a token sees only those before)."""
    length = g.op("Shape", [ids], "sequence_length", start=1, end=2)
    square = g.op("Concat", [length, length], "mask_shape", axis=0)
    full = g.op("ConstantOfShape", [square], "mask_full", value=helper.make_tensor("masked", FLOAT, [1], [MASKED]))
    return g.op("Trilu", [full, g.const(1, np.int64, "one_above")], "causal_mask", upper=1)


def _layer(g: GraphBuilder, h: str, prefix: str, cfg: TextEncoderConfig, batch: str, mask: str) -> str:
    """CLIPEncoderLayer: pre-norm self-attention and MLP, each with its residual."""
    width, eps = cfg.hidden_size, cfg.layer_norm_eps
    heads = cfg.num_attention_heads
    x = L.layer_norm(g, h, f"{prefix}.layer_norm1", width, eps)
    q = L.linear(g, x, f"{prefix}.self_attn.q_proj", width, width)
    k = L.linear(g, x, f"{prefix}.self_attn.k_proj", width, width)
    v = L.linear(g, x, f"{prefix}.self_attn.v_proj", width, width)
    a = L.attention_core(g, q, k, v, f"{prefix}.self_attn", batch, heads, width // heads, mask)
    h = g.op("Add", [h, L.linear(g, a, f"{prefix}.self_attn.out_proj", width, width)], f"{prefix}/attended")
    x = L.layer_norm(g, h, f"{prefix}.layer_norm2", width, eps)
    x = L.linear(g, x, f"{prefix}.mlp.fc1", width, cfg.intermediate_size)
    x = L.activation(g, cfg.hidden_act, x, f"{prefix}.mlp.act")
    x = L.linear(g, x, f"{prefix}.mlp.fc2", cfg.intermediate_size, width)
    return g.op("Add", [h, x], f"{prefix}/out")


def _pooled(g: GraphBuilder, ids: str, last: str, cfg: TextEncoderConfig) -> str:
    """The final state at the end-of-text token: the largest id (configs with eos_token_id 2, the
    pre-2023 convention every SD encoder's config keeps) or the first ``eos_token_id``, as transformers."""
    if cfg.eos_token_id == 2:
        keys = ids
    else:
        found = g.op("Equal", [ids, g.const(cfg.eos_token_id, np.int32, "eos_id")], "is_eos")
        keys = g.op("Cast", [found], "is_eos_int", to=INT32)
    position = g.op("ArgMax", [keys], "eos_position", axis=-1, keepdims=1)
    return g.op("GatherND", [last, position], "pooled", batch_dims=1)


def build_text_encoder(cfg: TextEncoderConfig) -> onnx.ModelProto:
    """The text encoder graph (see the module docstring for inputs and outputs)."""
    g = GraphBuilder("text_encoder")
    ids = g.input("input_ids", INT32, ["batch_size", "sequence_length"])
    width, prefix = cfg.hidden_size, "text_model"
    table = g.weight(f"{prefix}.embeddings.token_embedding.weight", (cfg.vocab_size, width))
    tokens = g.op("Gather", [table, ids], "token_embeds", axis=0)
    positions = g.weight(f"{prefix}.embeddings.position_embedding.weight", (cfg.max_position_embeddings, width))
    length = g.op("Shape", [ids], "sequence_length_for_positions", start=1, end=2)
    rows = g.op("Slice", [positions, g.ints([0], "zero"), length, g.ints([0], "zero")], "position_embeds")
    embedded = g.op("Add", [tokens, rows], "embeddings")
    shape3 = g.op("Concat", [g.op("Shape", [ids], "ids_shape"), g.ints([width], "width")], "states_shape", axis=0)
    batch = L.batch_of(g, ids)
    mask = _causal_mask(g, ids)
    h = g.op("Reshape", [embedded, g.ints([-1, width])], "embeddings/tokens")
    states = [embedded]
    for i in range(cfg.num_hidden_layers):
        h = _layer(g, h, f"{prefix}.encoder.layers.{i}", cfg, batch, mask)
        if cfg.hidden_states:
            states.append(g.op("Reshape", [h, shape3], f"hidden_states_{i + 1}"))
    final = L.layer_norm(g, h, f"{prefix}.final_layer_norm", width, cfg.layer_norm_eps)
    last = g.op("Reshape", [final, shape3], "last_hidden")
    pooled = _pooled(g, ids, last, cfg)
    seq = ["batch_size", "sequence_length", width]
    if cfg.with_projection:
        projected = L.linear(g, pooled, "text_projection", width, cfg.projection_dim, bias=False)
        g.output(projected, "text_embeds", FLOAT, ["batch_size", cfg.projection_dim])
        g.output(last, "last_hidden_state", FLOAT, seq)
    else:
        g.output(last, "last_hidden_state", FLOAT, seq)
        g.output(pooled, "pooler_output", FLOAT, ["batch_size", width])
    if cfg.hidden_states:
        for i, value in enumerate(states):
            g.output(value, f"hidden_states.{i}", FLOAT, seq)
    kind = "CLIPTextModelWithProjection" if cfg.with_projection else "CLIPTextModel"
    return g.model(f"{kind} (frame.convert.graphs)")
