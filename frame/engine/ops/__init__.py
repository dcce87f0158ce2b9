"""ONNX op kernels in numpy. Importing this package fills the registry (see ``registry``).

Families: ``elementwise`` (binary arithmetic, comparisons, logic), ``unary`` (maths, activations),
``shape`` (layout), ``indexing`` (gather/scatter), ``convert`` (Cast, Constant, Range), ``reduce``,
``linalg`` (MatMul, Gemm), ``conv`` (Conv, ConvTranspose), ``pool``, ``norm`` (Softmax and the
normalisations), ``resize`` (Resize, Upsample), ``quant`` (QDQ and dynamic quantisation),
``control_flow`` (If, Loop, Scan), ``recurrent`` (LSTM, GRU, RNN), ``random`` (RandomNormal[Like],
RandomUniform[Like]).
"""

from frame.engine.ops import (  # noqa: F401  (imported to register their kernels)
    control_flow,
    conv,
    convert,
    elementwise,
    indexing,
    linalg,
    norm,
    pool,
    quant,
    random,
    recurrent,
    reduce,
    resize,
    shape,
    unary,
)
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
