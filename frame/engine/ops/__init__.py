"""ONNX op kernels in numpy. Importing this package fills the registry (see ``registry``) with the core ops.

Families: ``elementwise`` (binary arithmetic, comparisons, logic), ``unary`` (maths, activations),
``shape`` (layout), ``indexing`` (gather/scatter), ``convert`` (Cast, Constant, Range), ``reduce``,
``linalg`` (MatMul, Gemm), ``conv`` (Conv, ConvTranspose), ``pool``, ``norm`` (Softmax and the
normalisations), ``resize`` (Resize, Upsample), ``quant`` (QuantizeLinear, DequantizeLinear),
``random`` (RandomNormal[Like], RandomUniform[Like]).

Ops no frame model has (LSTM/GRU/RNN, If/Loop/Scan, dynamic quantisation, TopK/NonZero/OneHot/Hardmax)
are in ``optional``, which ``lookup`` imports module by module when a graph first asks for one.
"""

from frame.engine.ops import (  # noqa: F401  (imported to register their kernels)
    conv,
    convert,
    elementwise,
    indexing,
    linalg,
    norm,
    pool,
    quant,
    random,
    reduce,
    resize,
    shape,
    unary,
)
from frame.engine.ops.lookup import bind_node, resolve, supported_op_types
from frame.engine.ops.registry import OpSpec, UnsupportedOp, decode_attributes, register

__all__ = ["OpSpec", "UnsupportedOp", "bind_node", "decode_attributes", "register", "resolve",
           "supported_op_types"]
