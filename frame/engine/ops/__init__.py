"""ONNX op kernels in numpy. Importing this package fills the registry (see ``registry``)."""

from frame.engine.ops.registry import OpSpec, UnsupportedOp, register, resolve, supported_op_types

__all__ = ["OpSpec", "UnsupportedOp", "register", "resolve", "supported_op_types"]
