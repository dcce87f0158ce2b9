"""OnnxStream's model.txt grammar and name escaping (frame.engine.onnxstream.text / names)."""

from __future__ import annotations

import pytest

from frame.engine.errors import ModelFormatError
from frame.engine.onnxstream.activations import parse_range_data, range_to_scale
from frame.engine.onnxstream.build import node_opset, weight_name
from frame.engine.onnxstream.names import escape, unescape
from frame.engine.onnxstream.text import parse_line, parse_model_text

# The example line of OnnxStream's format description (SD 1.5 VAE decoder, uint8 conv weight).
EXAMPLE = ("Conv_4:Conv*input:input_2E_1(1,4,64,64);post_5F_quant_5F_conv_2E_weight_nchw.bin("
           "uint8[0.0035054587850383684,134]:4,4,1,1);post_5F_quant_5F_conv_2E_bias.bin(float32:4)*"
           "output:input(1,4,64,64)*dilations:1,1;group:1;kernel_shape:1,1;pads:0,0,0,0;strides:1,1")


@pytest.mark.parametrize(("name", "escaped"), [
    ("input.1", "input_2E_1"),
    ("encoder_hidden_states", "encoder_5F_hidden_5F_states"),
    ("/model.22/Constant_output_0", "_2F_model_2E_22_2F_Constant_5F_output_5F_0"),
    ("onnx::Reshape_0", "onnx_3A__3A_Reshape_5F_0"),
    ("plain123", "plain123"),
    ("é", "_E9_"),
])
def test_escape_round_trip(name, escaped):
    assert escape(name) == escaped
    assert unescape(escaped) == name


@pytest.mark.parametrize("raw", ["a_b_c", "x_nchw", "_", "w_GG_", "tail_"])
def test_unescape_keeps_names_that_are_not_escapes(raw):
    assert unescape(raw) == raw


def test_example_line_of_the_format_description():
    op = parse_line(EXAMPLE, 7)
    assert (op.number, op.name, op.op_type) == (7, "Conv_4", "Conv")
    x, w, b = op.inputs
    assert (x.name, x.dims, x.dtype) == ("input_2E_1", (1, 4, 64, 64), None)
    assert (w.dtype, w.dims, w.scale, w.zero_point) == ("uint8", (4, 4, 1, 1), 0.0035054587850383684, 134)
    assert (b.dtype, b.dims) == ("float32", (4,))
    assert op.outputs[0].name == "input" and not op.outputs[0].is_weight
    assert dict(op.attrs) == {"dilations": "1,1", "group": "1", "kernel_shape": "1,1", "pads": "0,0,0,0",
                              "strides": "1,1"}
    assert weight_name(w.name) == "post_quant_conv.weight"


def test_omitted_inputs_scalars_dynamic_dims_and_op_names_with_colons():
    op = parse_line("/m/Resize:x:Resize*input:a(0,3,0,0);;s.bin(float32:4)*output:b(0,3,0,0)*mode:nearest", 1)
    assert op.name == "/m/Resize:x" and op.inputs[1] is None
    assert op.inputs[0].dims == (0, 3, 0, 0)  # 0 = dynamic
    scalar = parse_line("G:Gather*input:a(2);i.bin(int64:)*output:b()*axis:0", 2)
    assert scalar.inputs[1].dims == () and scalar.outputs[0].dims == ()
    unnamed = parse_line(":Relu*input:a(1)*output:b(1)", 3)
    assert unnamed.name == "#3"


@pytest.mark.parametrize(("line", "message"), [
    ("Relu*input:a(1)*output:b(1)", "name:OpType"),
    ("r:Relu*a(1)*output:b(1)", "'input:'"),
    ("r:Relu*input:a(1)", "expected"),
    ("r:Relu*input:a(1*output:b(1)", "bad tensor"),
    ("r:Relu*input:w.bin(bfloat16:1)*output:b(1)", "unsupported weight type 'bfloat16'"),
    ("r:Relu*input:w.bin(uint8[0.5]:1)*output:b(1)", "uint8[scale,zero_point]"),
    ("r:Relu*input:w.bin(uint8[0.5,300]:1)*output:b(1)", "zero point 300"),
    ("r:Relu*input:a(1,-2)*output:b(1)", "negative dimension"),
    ("r:Relu*input:a(1)*output:b.bin(float32:1)", "cannot be a weights file"),
    ("r:Relu*input:a(1)*output:b(1)*alpha", "key:value"),
])
def test_bad_lines_name_the_line_and_the_problem(line, message):
    with pytest.raises(ModelFormatError, match="line 1: .*" + message.replace("[", r"\[").replace("(", r"\(")):
        parse_model_text(line + "\n", "m/model.txt")


def test_blank_lines_and_crlf_are_accepted_and_an_empty_file_is_not():
    ops = parse_model_text("a:Relu*input:x(1)*output:y(1)\r\n\r\nb:Relu*input:y(1)*output:z(1)\r\n")
    assert [op.number for op in ops] == [1, 3]
    with pytest.raises(ModelFormatError, match="no operations"):
        parse_model_text("\n\n")


def test_node_opset_follows_the_form_each_line_uses():
    def op(text):
        return parse_line(text, 1)
    assert node_opset(op("u:Unsqueeze*input:a(2)*output:b(1,2)*axes:0")) == 12
    assert node_opset(op("u:Unsqueeze*input:a(2);ax.bin(int64:1)*output:b(1,2)")) == 17
    assert node_opset(op("s:Split*input:a(4);sp.bin(int64:2)*output:b(2);c(2)*axis:0")) == 17
    assert node_opset(op("s:Split*input:a(4)*output:b(2);c(2)*axis:0;split:2,2")) == 12
    assert node_opset(op("r:ReduceMean*input:a(4);ax.bin(int64:1)*output:b(1)*keepdims:1")) == 18


def test_range_data_and_its_scales():
    ranges = parse_range_data("/decoder/conv_in/Conv,-7.5,6.25\n\nop,with,comma,0,2\n")
    assert ranges == {"/decoder/conv_in/Conv": (-7.5, 6.25), "op,with,comma": (0.0, 2.0)}
    scale, zero = range_to_scale(-7.5, 6.25)
    assert scale == pytest.approx(13.75 / 255) and zero == int(7.5 / (13.75 / 255))
    assert range_to_scale(2.0, 4.0)[1] == 0  # a positive range is widened down to 0
    assert range_to_scale(-4.0, -2.0) == (pytest.approx(4 / 255), 254)  # float32 4 / (4 / 255) truncates to 254
    with pytest.raises(ModelFormatError, match="line 1"):
        parse_range_data("conv,abc,1\n")
