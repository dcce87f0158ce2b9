"""ONNX op kernels in numpy. Importing this package fills the registry (see ``registry``).

Families: ``elementwise`` (binary arithmetic, comparisons, logic), ``unary`` (maths, activations),
``shape`` (layout), ``indexing`` (gather/scatter), ``convert`` (Cast, Constant, Range), ``reduce``,
``linalg`` (MatMul, Gemm), ``conv`` (Conv, ConvTranspose, pooling), ``norm`` (Softmax and the
normalisations), ``resize``.
"""

from frame.engine.ops import convert, elementwise, indexing, shape, unary  # noqa: F401  (registration)
from frame.engine.ops.registry import (
    OpSpec,
    UnsupportedOp,
    bind_node,
    decode_attributes,
    register,
    resolve,
    supported_op_types,
)

__all__ = ["OpSpec", "UnsupportedOp", "bind_node", "decode_attributes", "register", "resolve",
           "supported_op_types"]
