"""Write an OnnxStream model folder back as one ONNX file, as frame's reader understands the folder.

The graph is the one ``frame.engine.onnxstream`` builds (escaped names restored, conv weights in NCHW
whichever file the folder has, uint8 weights behind DequantizeLinear, range_data.txt as
Quantize/DequantizeLinear), with every ``.bin`` loaded as an initializer. Tests run the result in
onnxruntime as an independent check of the engine's kernels on real OnnxStream folders:

    python tools/onnxstream_to_onnx.py yolov8n_fp32/ yolov8n.onnx
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import onnx
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from frame.engine.onnxstream import read_structure  # noqa: E402
from frame.engine.providers import NoCache  # noqa: E402


def to_onnx(folder: str) -> onnx.ModelProto:
    structure = read_structure(folder)
    model = onnx.ModelProto.FromString(structure.proto.SerializeToString())
    provider = NoCache()
    try:
        for ref in structure.weights.values():
            array = ref.value if ref.value is not None else provider.read(ref)
            model.graph.initializer.append(numpy_helper.from_array(array.reshape(ref.shape), ref.name))
    finally:
        provider.close()
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="OnnxStream model folder (or its model.txt)")
    parser.add_argument("out", help="output .onnx file")
    args = parser.parse_args(argv)
    onnx.save(to_onnx(args.folder), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
