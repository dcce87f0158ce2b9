"""Malformed and non-finite LoRA files (issue 40 item 8): each is refused by ``read_checked`` and by
``frame model lora-check`` with one line naming the file, never a traceback or "TypeError"; NaN or
inf in a factor or alpha no longer passes (it painted an all-black picture). The files come from
``tests/lora_files.py``."""

from __future__ import annotations

import numpy as np
import pytest

from frame.cli.program import main as frame_main
from frame.engine.lora import read_checked, values
from frame.errors import UsageError
from frame.models import bundled
from tests.lora_files import MALFORMED, demo_lora, malformed_lora, non_finite_lora, write_safetensors

NON_FINITE = [("up", float("nan")), ("down", float("inf")), ("up", float("-inf")), ("alpha", float("nan")),
              ("alpha", float("inf"))]


def _cases(tmp_path):
    for kind in MALFORMED:
        yield kind, malformed_lora(tmp_path / f"{kind}.safetensors", kind)
    for where, value in NON_FINITE:
        yield f"{where}-{value}", non_finite_lora(tmp_path / f"{where}_{value}.safetensors", where, value)


@pytest.mark.parametrize("kind", MALFORMED)
def test_malformed_files_are_refused_by_name(tmp_path, kind):
    path = malformed_lora(tmp_path / f"{kind}.safetensors", kind)
    with pytest.raises(UsageError) as caught:
        read_checked(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and "\n" not in message and "Error" not in message, message


@pytest.mark.parametrize(("where", "value"), NON_FINITE)
def test_non_finite_factors_and_alpha_are_refused(tmp_path, where, value):
    path = non_finite_lora(tmp_path / "bad.safetensors", where, value)
    with pytest.raises(UsageError, match=r"bad\.safetensors: .*(NaN or infinite|not a finite number)"):
        read_checked(path)


def test_bf16_and_fp16_non_finite_values_are_found_in_any_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(values, "CHUNK_BYTES", 64)  # many chunks: the bad value is in a late one
    down = np.zeros((2, 512), np.float16)
    down.flat[1000] = np.inf
    path = write_safetensors(tmp_path / "h.safetensors", {"lora_unet_a_b.lora_down.weight": down,
                                                          "lora_unet_a_b.lora_up.weight": np.zeros((8, 2), np.float16)})
    with pytest.raises(UsageError, match="NaN or infinite"):
        read_checked(path)
    bits = (np.zeros((2, 512), np.float32).view(np.uint32) >> 16).astype(np.uint16)
    bits.flat[999] = 0x7FC0  # a bfloat16 NaN
    raw = path.read_bytes()
    header_len = int.from_bytes(raw[:8], "little")
    import json
    header = json.loads(raw[8:8 + header_len])
    header["lora_unet_a_b.lora_down.weight"]["dtype"] = "BF16"
    header["lora_unet_a_b.lora_up.weight"]["dtype"] = "BF16"
    text = json.dumps(header).encode()
    body = raw[8 + header_len:]
    path.write_bytes(len(text).to_bytes(8, "little") + text + bits.tobytes() + body[bits.nbytes:])
    with pytest.raises(UsageError, match="NaN or infinite"):
        read_checked(path)


def test_a_truncated_file_is_refused_before_the_render_meets_it(tmp_path):
    path = demo_lora(tmp_path / "cut.safetensors")
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(UsageError, match="cut.safetensors"):
        read_checked(path)


def test_a_good_file_passes(tmp_path):
    lora = read_checked(demo_lora(tmp_path / "good.safetensors", alpha=1.0))
    assert sum(len(m) for m in lora.components.values()) == 3


def test_lora_check_names_the_file_in_one_line(tmp_path, capsys):
    demo = str(bundled.demo_model_path())
    for kind, path in _cases(tmp_path):
        assert frame_main(["model", "lora-check", str(path), "--model", demo]) != 0, kind
        captured = capsys.readouterr()
        text = (captured.out + captured.err).strip()
        assert str(path) in text and "TypeError" not in text and "Traceback" not in text, (kind, text)
        assert len(text.splitlines()) == 1, (kind, text)
