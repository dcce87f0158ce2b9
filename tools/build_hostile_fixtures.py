"""Hostile embedding and LoRA files: every file family of issue 40's attack round (items 5-8).

Each case is a file a reader of frame's must refuse by name, without crashing, within a memory cap:

* ``.pt`` embeddings (item 5, 6): negative strides and storage offsets, a small negative offset, a
  tensor past its storage, a storage of the wrong size, deeply nested and "billion laughs" tuple keys,
  a self-containing list, a zero-stride tensor of 3 GB, a 2 MB file whose storage unpacks to 2 GB, a
  0.6 MB pickle that unpacks to 600 MB, a call of ``os.system``, a torch file from before 1.6;
* ``.safetensors`` embeddings (item 7): the header a list, no offsets, float offsets, a negative
  shape, deep nesting, a 42 MB header of 600,000 keys;
* LoRA ``.safetensors`` files (item 8): alpha empty, a dtype list, a deep header, metadata of the wrong
  type, float or string offsets, rank 0, 1-D up, huge or infinite shapes, a scalar down.

The small files are committed under ``tests/fixtures/hostile/`` (``CASES`` says which reader takes
each one and a word its refusal names); the big ones (``big``) are written at test time into a
temporary folder by ``write_case``, in a few seconds and a few MB. No torch needed (the pickles and
zips are written byte by byte: ``tools/hostile_pickles.py``).

    PYTHONPATH=$PWD /work/main/.venv/bin/python tools/build_hostile_fixtures.py
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from hostile_pickles import (  # noqa: E402  (a sibling script, found through sys.path)
    Call,
    Entry,
    Global,
    Raw,
    Tensor,
    dumps,
    emit,
    laughs,
    nested_tuple,
    repeated_deflate,
    torch_zip,
    zip_bytes,
)

OUT = Path(__file__).parents[1] / "tests" / "fixtures" / "hostile"
F32 = b"\x00\x00\x80\x3f" * 8  # eight float32 ones: a storage of 8 elements


def _embedding(tensor: object, storages: dict[str, bytes] | None = None) -> bytes:
    return torch_zip({"string_to_param": {"*": tensor}, "name": "x"}, storages or {"0": F32})


def _key_pickle(key: Raw) -> bytes:
    return b"\x80\x02}" + key.data + emit(Tensor("0", 8, (1, 8), (8, 1))) + b"s."


def _pickle_bomb() -> bytes:
    block, size, crc = repeated_deflate(b"N0" * (1 << 19), 600)  # NONE POP, 600 MB of it
    return zip_bytes([Entry("archive/data.pkl", deflated=block, size=size, crc=crc),
                      Entry("archive/data/0", F32)])


def _storage_bomb() -> bytes:
    numel = 1 << 29  # 2 GiB of float32 zeros
    block, size, crc = repeated_deflate(bytes(1 << 20), (numel * 4) >> 20)
    pickle = dumps({"string_to_param": {"*": Tensor("0", numel, (numel,), (1,))}})
    return zip_bytes([Entry("archive/data.pkl", pickle), Entry("archive/data/0", deflated=block, size=size, crc=crc)])


def _safetensors(header: object, body: bytes = b"", raw: bytes | None = None) -> bytes:
    text = raw if raw is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + body


def _st_entry(dtype: object = "F32", shape: object = (1, 8), offsets: object = (0, 32)) -> dict:
    return {"dtype": dtype, "shape": list(shape) if isinstance(shape, tuple) else shape,
            "data_offsets": list(offsets) if isinstance(offsets, tuple) else offsets}


def _emb_st(**entry: object) -> bytes:
    return _safetensors({"emb_params": _st_entry(**entry)}, bytes(32))


def _big_header() -> bytes:
    """600,000 alpha entries, 42 MB of JSON, written as bytes (no 600,000-entry dict in the test)."""
    entry = b'"k%d.alpha":{"dtype":"F32","shape":[],"data_offsets":[%d,%d]}'
    text = b"{" + b",".join(entry % (i, 4 * i, 4 * i + 4) for i in range(600_000)) + b"}"
    return _safetensors(None, bytes(4 * 600_000), raw=text)


def _lora(modules: dict[str, dict], metadata: object = None, raw: bytes | None = None) -> bytes:
    """A kohya LoRA of one module: ``modules`` maps down/up/alpha to header entries (offsets filled)."""
    header: dict = {} if metadata is None else {"__metadata__": metadata}
    body = b""
    for part, entry in modules.items():
        entry = dict(entry)
        if "data_offsets" not in entry:
            count = 1
            for dim in entry["shape"]:
                count *= dim
            entry["data_offsets"] = [len(body), len(body) + 4 * count]
            body += bytes(4 * count)
        key = f"lora_unet_down_blocks_0_attentions_0_proj_in.{part}" if part != "alpha" else \
            "lora_unet_down_blocks_0_attentions_0_proj_in.alpha"
        header[key] = entry
    return _safetensors(header, body, raw)


GOOD = {"lora_down.weight": {"dtype": "F32", "shape": [4, 8]}, "lora_up.weight": {"dtype": "F32", "shape": [8, 4]},
        "alpha": {"dtype": "F32", "shape": []}}


def _lora_with(part: str, **change: object) -> bytes:
    modules = {k: dict(v) for k, v in GOOD.items()}
    modules[part].update(change)
    return _lora(modules)


@dataclass(frozen=True)
class Case:
    """``reader``: "embedding" (a textual-inversion file) or "lora"; ``words``: what the refusal
    names besides the file; ``big``: written at test time only."""

    name: str
    reader: str
    words: str
    build: Callable[[], bytes]
    big: bool = False


CASES: tuple[Case, ...] = (
    # item 5: bounds
    Case("negative_stride.pt", "embedding", "negative", lambda: _embedding(Tensor("0", 8, (1, 8), (8, -1)))),
    Case("negative_offset.pt", "embedding", "negative", lambda: _embedding(Tensor("0", 8, (1, 8), (8, 1), -4))),
    Case("far_negative_offset.pt", "embedding", "negative",
         lambda: _embedding(Tensor("0", 8, (1, 8), (8, 1), -(1 << 40)))),
    Case("past_storage.pt", "embedding", "past its storage", lambda: _embedding(Tensor("0", 8, (2, 8), (8, 1)))),
    Case("huge_stride.pt", "embedding", "past its storage",
         lambda: _embedding(Tensor("0", 8, (2, 8), (1 << 62, 1)))),
    Case("storage_size_lie.pt", "embedding", "holds 32 bytes",
         lambda: _embedding(Tensor("0", 1 << 20, (1, 8), (8, 1)))),
    Case("nested_tuple_key.pt", "embedding", "dict key",
         lambda: torch_zip(None, {"0": F32}, pickle=_key_pickle(nested_tuple(150_000)))),
    Case("billion_laughs_key.pt", "embedding", "dict key",
         lambda: torch_zip(None, {"0": F32}, pickle=_key_pickle(laughs(64)))),
    Case("billion_laughs_value.pt", "embedding", "nested deeper",
         lambda: torch_zip(None, {"0": F32}, pickle=b"\x80\x02}" + emit("string_to_param") + laughs(64).data + b"s.")),
    Case("self_list.pt", "embedding", "contains itself",
         lambda: torch_zip(None, {}, pickle=b"\x80\x02]q\x00h\x00a.")),
    Case("os_system.pt", "embedding", "posix.system",
         lambda: torch_zip(None, {}, pickle=dumps({"string_to_param": Call(Global("posix", "system"), ("id",))}))),
    Case("legacy.pt", "embedding", "not a torch zip file", lambda: b"\x80\x02\x8a\x0alegacy torch format"),
    # item 6: memory bombs
    Case("zero_stride_3gb.pt", "embedding", "MiB",
         lambda: _embedding(Tensor("0", 8, (750_000_000,), (0,)))),
    Case("huge_shape.pt", "embedding", "MiB", lambda: _embedding(Tensor("0", 8, (1 << 40, 1 << 40), (0, 0)))),
    Case("pickle_bomb_600mb.pt", "embedding", "data.pkl unpacks", _pickle_bomb, big=True),
    Case("storage_bomb_2gb.pt", "embedding", "MiB", _storage_bomb, big=True),
    # item 7: safetensors embeddings
    Case("header_list.safetensors", "embedding", "not an object", lambda: _safetensors([1, 2])),
    Case("no_offsets.safetensors", "embedding", "data_offsets",
         lambda: _safetensors({"emb_params": {"dtype": "F32", "shape": [1, 8]}}, bytes(32))),
    Case("float_offsets.safetensors", "embedding", "data_offsets", lambda: _emb_st(offsets=(0.0, 32.0))),
    Case("negative_shape.safetensors", "embedding", "shape", lambda: _emb_st(shape=(-1, 8))),
    Case("deep_nesting.safetensors", "embedding", "nest deeper",
         lambda: _safetensors(None, raw=b"[" * 50_000 + b"]" * 50_000)),
    Case("overlap.safetensors", "embedding", "share bytes",
         lambda: _safetensors({"a": _st_entry(), "b": _st_entry(offsets=(16, 48))}, bytes(48))),
    Case("huge_int.safetensors", "embedding", "not valid JSON",
         lambda: _safetensors(None, raw=b'{"a": {"dtype": "F32", "shape": [' + b"9" * 5000
                              + b'], "data_offsets": [0, 4]}}')),
    Case("header_42mb.safetensors", "lora", "header is", _big_header, big=True),
    # item 8: LoRA headers
    Case("lora_alpha_empty.safetensors", "lora", "alpha", lambda: _lora_with("alpha", shape=[0])),
    Case("lora_dtype_list.safetensors", "lora", "dtype", lambda: _lora_with("lora_down.weight", dtype=["F32"])),
    Case("lora_deep_header.safetensors", "lora", "nest deeper",
         lambda: _lora({}, raw=b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}")),
    Case("lora_metadata_list.safetensors", "lora", "__metadata__", lambda: _lora(GOOD, metadata=["a"])),
    Case("lora_metadata_value.safetensors", "lora", "__metadata__",
         lambda: _lora(GOOD, metadata={"ss_network_dim": 4})),
    Case("lora_metadata_nested.safetensors", "lora", "__metadata__",
         lambda: _lora(GOOD, metadata={"lora_adapter_metadata": {"unet.lora_alpha": 8}})),
    Case("lora_off_float.safetensors", "lora", "data_offsets",
         lambda: _lora_with("lora_down.weight", data_offsets=[0.0, 128.0])),
    Case("lora_off_string.safetensors", "lora", "data_offsets",
         lambda: _lora_with("lora_down.weight", data_offsets=["0", "128"])),
    Case("lora_off_reversed.safetensors", "lora", "data_offsets",
         lambda: _lora_with("lora_down.weight", data_offsets=[128, 0])),
    Case("lora_rank_zero.safetensors", "lora", "rank", lambda: _lora(
        {"lora_down.weight": {"dtype": "F32", "shape": [0, 8]}, "lora_up.weight": {"dtype": "F32", "shape": [8, 0]}})),
    Case("lora_up_1d.safetensors", "lora", "up", lambda: _lora_with("lora_up.weight", shape=[8])),
    Case("lora_down_scalar.safetensors", "lora", "down", lambda: _lora_with("lora_down.weight", shape=[])),
    Case("lora_shape_huge.safetensors", "lora", "shape",
         lambda: _lora_with("lora_down.weight", shape=[1 << 40, 1 << 40], data_offsets=[0, 128])),
    Case("lora_shape_inf.safetensors", "lora", "shape", lambda: _lora(
        {}, raw=b'{"x.lora_down.weight": {"dtype": "F32", "shape": [Infinity, 8], "data_offsets": [0, 32]}}')),
    Case("lora_shape_float.safetensors", "lora", "shape",
         lambda: _lora_with("lora_down.weight", shape=[4.0, 8], data_offsets=[0, 128])),
    Case("lora_dtype_unknown.safetensors", "lora", "dtype", lambda: _lora_with("lora_down.weight", dtype="F8_E4M3")),
)


def write_case(case: Case, folder: Path) -> Path:
    path = folder / case.name
    path.write_bytes(case.build())
    return path


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for stale in OUT.iterdir():
        stale.unlink()
    for case in CASES:
        if not case.big:
            path = write_case(case, OUT)
            print(f"{path.relative_to(OUT.parents[2])}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
