"""ONNX export helpers shared by the fixture builders (dev-only: needs torch, onnx, onnxruntime).

Both torch exporters are covered because real-world SD exports come from both: the TorchScript
exporter (``dynamo=False``, what optimum used for years) and the dynamo exporter (``dynamo=True``,
torch's default since 2.9). The fp16 helper reproduces Optimum's "fp16 weights" layout: every float
initializer stored as float16 and widened by a Cast node, so the graph still computes in float32.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch

EXTERNAL_DATA_NAME = "model.onnx_data"


def export_torchscript(
    module: torch.nn.Module,
    args: tuple,
    input_names: list[str],
    output_names: list[str],
    opset: int,
    dynamic_axes: dict[str, dict[int, str]] | None,
) -> onnx.ModelProto:
    """Export with the TorchScript exporter and return the ModelProto (weights embedded)."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            buf,
            dynamo=False,
            opset_version=opset,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes or None,
            do_constant_folding=True,
        )
    model = onnx.load_from_string(buf.getvalue())
    strip_debug_metadata(model)
    return model


def export_dynamo(
    module: torch.nn.Module,
    args: tuple,
    input_names: list[str],
    output_names: list[str],
    opset: int,
    dynamic_axes: dict[str, dict[int, str]] | None,
) -> onnx.ModelProto:
    """Export with the dynamo exporter; dynamic axes become ``Dim.AUTO`` and are renamed afterwards.

    torch.export names symbolic dims ``s0``, ``s53``...; they are renamed to the optimum-style names
    from ``dynamic_axes`` so fixtures read the same whichever exporter made them.
    """
    dynamic_shapes = None
    if dynamic_axes:
        dynamic_shapes = tuple(
            {axis: torch.export.Dim.AUTO for axis in dynamic_axes.get(name, {})} or None
            for name in input_names
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            module,
            args,
            dynamo=True,
            opset_version=opset,
            input_names=input_names,
            output_names=output_names,
            dynamic_shapes=dynamic_shapes,
            verbose=False,
        )
    model = program.model_proto
    strip_debug_metadata(model)
    if dynamic_axes:
        _rename_symbolic_dims(model, dynamic_axes)
    return model


def strip_debug_metadata(model: onnx.ModelProto) -> None:
    """Drop per-node stack traces and doc strings the exporters attach (often 80% of a tiny file).

    They are debugging aids only; no runtime reads them. Shape annotations (value_info) are kept.
    """
    for node in model.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""


def _rename_symbolic_dims(model: onnx.ModelProto, dynamic_axes: dict[str, dict[int, str]]) -> None:
    """Replace torch.export's ``sNN`` dim params by the names given in ``dynamic_axes``."""
    mapping: dict[str, str] = {}
    for value in model.graph.input:
        for axis, name in dynamic_axes.get(value.name, {}).items():
            dim = value.type.tensor_type.shape.dim[axis]
            if dim.dim_param:
                mapping.setdefault(dim.dim_param, name)
    pattern = re.compile(r"\bs\d+\b")
    for value in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.dim_param = pattern.sub(lambda m: mapping.get(m.group(0), m.group(0)), dim.dim_param)


def to_fp16_weights(model: onnx.ModelProto, min_elements: int = 2) -> onnx.ModelProto:
    """Optimum-style fp16 weights (float16 initializers + Cast to float), by ``frame model convert``'s code."""
    from frame.convert.files import Options, convert_proto
    from frame.convert.policy import Policy

    return convert_proto(model, Options("fp16", policy=Policy(min_elements=min_elements)))


def round_weights_to_fp16(module: torch.nn.Module) -> None:
    """Round a torch module's float parameters to fp16 precision in place (they stay float32).

    Used before an fp16-weight export so torch and the exported model hold identical values.
    """
    with torch.no_grad():
        for param in module.parameters():
            param.copy_(param.half().float())


def save(model: onnx.ModelProto, folder: Path, external: bool, size_threshold: int = 0) -> list[Path]:
    """Check and write ``folder/model.onnx`` (and ``model.onnx_data`` when ``external``).

    Tensors of at least ``size_threshold`` bytes go to the data file. 0 moves every initializer;
    dynamo exports need 1024 (onnx's default) because onnxruntime's shape inference cannot read
    small int64 shape/axes initializers from external data.
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    data = folder / EXTERNAL_DATA_NAME
    for stale in (path, data):
        if stale.exists():
            stale.unlink()
    onnx.checker.check_model(model)
    if external:
        onnx.save(
            model,
            os.fspath(path),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=EXTERNAL_DATA_NAME,
            size_threshold=size_threshold,
        )
        onnx.checker.check_model(os.fspath(path))
        return [path, data]
    onnx.save(model, os.fspath(path))
    return [path]


def run_ort(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run a saved model with onnxruntime (CPU, single thread, no graph optimisation surprises)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(os.fspath(path), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def run_torch(module: torch.nn.Module, feeds: dict[str, np.ndarray], output_names: list[str]):
    """Run the torch module on the same feeds (in input order) and name its outputs."""
    with torch.no_grad():
        result = module(*[torch.from_numpy(np.array(v, copy=True)) for v in feeds.values()])
    if isinstance(result, torch.Tensor):
        result = (result,)
    return {name: t.float().numpy() for name, t in zip(output_names, result)}


def io_signature(model: onnx.ModelProto) -> dict[str, Any]:
    """Inputs and outputs as {name: {"dtype", "shape"}} with symbolic dims as strings."""

    def describe(values) -> dict[str, Any]:
        out = {}
        for v in values:
            t = v.type.tensor_type
            shape = [d.dim_param if d.dim_param else d.dim_value for d in t.shape.dim]
            out[v.name] = {"dtype": onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name, "shape": shape}
        return out

    return {"inputs": describe(model.graph.input), "outputs": describe(model.graph.output)}


def max_errors(got: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Max absolute and relative-L2 error per output name."""
    errs = {}
    for name, r in ref.items():
        g = got[name].astype(np.float64)
        r = r.astype(np.float64)
        denom = max(float(np.linalg.norm(r)), 1e-12)
        errs[name] = {
            "max_abs": float(np.max(np.abs(g - r))) if r.size else 0.0,
            "rel_l2": float(np.linalg.norm(g - r) / denom),
        }
    return errs


def op_types(model: onnx.ModelProto) -> list[str]:
    """Sorted distinct op types of the main graph."""
    return sorted({n.op_type for n in model.graph.node})


def random_as_input(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """A copy whose one RandomNormalLike node is replaced by a graph input of the same name.

    onnxruntime draws its own noise (and refuses scale 0); with the draw as an input, a traced
    ``latent_dist.sample()`` can be checked exactly against torch's ``mean + std * eps``.
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    nodes = [n for n in copy.graph.node if n.op_type == "RandomNormalLike"]
    if len(nodes) != 1:
        raise ValueError(f"expected one RandomNormalLike node, found {len(nodes)}")
    node = nodes[0]
    dtype = next((a.i for a in node.attribute if a.name == "dtype"), onnx.TensorProto.FLOAT)
    copy.graph.node.remove(node)
    copy.graph.input.append(onnx.helper.make_tensor_value_info(node.output[0], dtype, None))
    return copy, node.output[0]
