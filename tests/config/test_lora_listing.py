"""The phone page lists only ``.safetensors`` files whose header names LoRA factors (issue 40 item 10:
garbage was listed): a cheap look without numpy (``frame.config.lora_header``), kept per file while
its size and time stay."""

from __future__ import annotations

import json
import os
import struct

import numpy as np

from frame.config import lora_header, lora_tags
from frame.engine.lora import files
from tests.lora_files import demo_lora, write_safetensors


def _header_file(path, header: bytes) -> None:
    path.write_bytes(struct.pack("<Q", len(header)) + header)


def test_only_lora_files_are_listed(tmp_path):
    demo_lora(tmp_path / "good.safetensors")
    peft = {"unet.a.lora_A.weight": np.zeros((2, 4), np.float32), "unet.a.lora_B.weight": np.zeros((4, 2), np.float32)}
    write_safetensors(tmp_path / "peft.safetensors", peft)
    write_safetensors(tmp_path / "embedding.safetensors", {"emb_params": np.zeros((2, 768), np.float32)})
    (tmp_path / "empty.safetensors").write_bytes(b"")
    (tmp_path / "garbage.safetensors").write_bytes(os.urandom(300))
    _header_file(tmp_path / "list.safetensors", b'["x.lora_down.weight"]')
    (tmp_path / "long.safetensors").write_bytes(struct.pack("<Q", 10_000) + b"{}")  # beyond the file
    _header_file(tmp_path / "nested.safetensors", b"[" * 100_000 + b"]" * 100_000)
    (tmp_path / "folder.safetensors").mkdir()
    assert [name for name, _ in lora_tags.available([str(tmp_path)])] == ["good", "peft"]


def test_a_large_header_is_searched_not_parsed(tmp_path):
    tensors = {"lora_unet_a.lora_down.weight": np.zeros((2, 4), np.float32),
               "lora_unet_a.lora_up.weight": np.zeros((4, 2), np.float32)}
    path = write_safetensors(tmp_path / "big.safetensors", tensors, metadata={"ss_tag_frequency": "x" * (2 << 20)})
    assert lora_header.looks_like_lora(path)
    metadata_only = {"__metadata__": {"ss_tag_frequency": "y" * (2 << 20)}, "w": {"dtype": "F32", "shape": [1],
                                                                                "data_offsets": [0, 4]}}
    text = json.dumps(metadata_only).encode()
    (tmp_path / "other.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * 4)
    assert not lora_header.looks_like_lora(tmp_path / "other.safetensors")


def test_the_answer_follows_the_file(tmp_path):
    path = tmp_path / "ink.safetensors"
    path.write_bytes(b"junk")
    assert lora_tags.available([str(tmp_path)]) == []
    demo_lora(path)
    assert lora_tags.available([str(tmp_path)]) == [("ink", str(path))]


def test_a_name_whose_first_file_is_garbage_is_not_listed(tmp_path):
    """A tag finds the first folder's file, so a good file of the same name further down is not offered."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "ink.safetensors").write_bytes(b"junk")
    demo_lora(tmp_path / "b" / "ink.safetensors")
    assert lora_tags.available([str(tmp_path / "a"), str(tmp_path / "b")]) == []


def test_the_suffixes_are_the_readers():
    assert set(lora_header.FACTOR_SUFFIXES) == {suffix for suffix, part in files._SUFFIXES if part != "alpha"}
