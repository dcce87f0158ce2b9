"""The torch-file reader (``frame.engine.io.torch_pickle``): what ``torch.save`` writes reads back equal
(when torch is installed), and what an attacker writes is refused by name, calls nothing, and costs
no more than its limits. The hostile files are written byte by byte (``tools/hostile_pickles.py``);
``tests/engine/test_hostile_files.py`` runs every family of them through the worker's readers."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from frame.engine.errors import FileFormatError
from frame.engine.io.pickle_vm import Opaque, PickleLimits
from frame.engine.io.torch_pickle import TorchLimits, open_torch

TOOLS = Path(__file__).parents[2] / "tools"


def _tool(name: str):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


hp = _tool("hostile_pickles")
F32 = np.arange(8, dtype="<f4").tobytes()


def _write(tmp_path: Path, root=None, storages=None, pickle=None, name="x.pt") -> Path:
    path = tmp_path / name
    path.write_bytes(hp.torch_zip(root, {"0": F32} if storages is None else storages, pickle=pickle))
    return path


def test_what_torch_saves_reads_back_equal(tmp_path):
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    saved = {"string_to_param": {"*": torch.nn.Parameter(base)}, "name": "x", "step": 3, "view": base[:, 1],
             "transposed": base.transpose(0, 2), "half": base.half(), "bf16": base.bfloat16() + 0.5,
             "ordered": OrderedDict(a=base), "long": torch.arange(5), "bool": torch.tensor([True, False]),
             "empty": torch.zeros(0, 3), "scalar": torch.tensor(3.5), "expanded": torch.ones(3).expand(4, 3),
             "int8": torch.tensor([-3, 4], dtype=torch.int8), "list": [base[0], 2.5, None]}
    for protocol in (2, 4):
        path = tmp_path / f"p{protocol}.pt"
        torch.save(saved, path, pickle_protocol=protocol)
        with open_torch(path) as reader:
            found = dict(reader.tensors())
            assert reader.root["name"] == "x" and reader.root["step"] == 3 and reader.root["list"][1:] == [2.5, None]
            assert isinstance(reader.root["ordered"], OrderedDict)
            for name, tensor in found.items():
                ref = saved
                for key in name.split("."):
                    ref = ref[int(key)] if isinstance(ref, list) else ref[key]
                ref = ref.detach()
                expected = (ref.float() if ref.dtype == torch.bfloat16 else ref).numpy()
                got = tensor.read()
                assert got.dtype == expected.dtype and got.shape == expected.shape, name
                assert np.array_equal(got, expected), name
        assert len(found) == 13


def test_a_tensor_is_read_only_when_asked_for(tmp_path):
    root = {"a": hp.Tensor("0", 8, (2, 4), (4, 1)), "b": hp.Tensor("1", 8, (8,), (1,))}
    path = tmp_path / "lazy.pt"
    raw = bytearray(hp.torch_zip(root, {"0": F32, "1": F32}))
    at = raw.index(b"archive/data/1") - 30  # the local header of storage 1: reading it would fail
    raw[at:at + 4] = b"XXXX"
    path.write_bytes(raw)
    with open_torch(path) as reader:
        tensors = dict(reader.tensors())
        assert list(tensors) == ["a", "b"] and tensors["b"].shape == (8,) and tensors["b"].dtype == "F32"
        assert np.array_equal(tensors["a"].read(), np.arange(8, dtype=np.float32).reshape(2, 4))
        with pytest.raises(FileFormatError, match="storage 1 has no local zip header"):
            tensors["b"].read()


def test_strided_views_copy_only_inside_their_storage(tmp_path):
    root = {"column": hp.Tensor("0", 8, (4,), (2,), 1), "broadcast": hp.Tensor("0", 8, (3, 2), (0, 1), 6)}
    with open_torch(_write(tmp_path, root)) as reader:
        tensors = dict(reader.tensors())
        assert tensors["column"].read().tolist() == [1, 3, 5, 7]
        assert tensors["broadcast"].read().tolist() == [[6, 7]] * 3


def test_nothing_a_file_names_is_called(tmp_path):
    target = tmp_path / "made-by-the-file"
    call = hp.Call(hp.Global("os", "mkdir"), (str(target),))
    path = _write(tmp_path, {"callback": call, "w": hp.Tensor("0", 8, (8,), (1,))})
    with pytest.raises(FileFormatError, match=r"x\.pt: the file holds a os\.mkdir"):
        open_torch(path)
    with open_torch(path, inert=True) as reader:  # a checkpoint's training bookkeeping: kept inert
        assert reader.root["callback"] == Opaque("os.mkdir")
        assert [name for name, _ in reader.tensors()] == ["w"]
    assert not target.exists()


@pytest.mark.parametrize(("pickle", "words"), [
    (b"\x80\x02}" + hp.laughs(64).data + b"K\x01s.", "dict key is a tuple"),
    (b"\x80\x02}" + hp.nested_tuple(100_000).data + b"K\x01s.", "dict key is a tuple"),
    (b"\x80\x02" + hp.laughs(40).data + b".", "nested deeper than 32"),
    (b"\x80\x02" + b"]" * 40 + b"a" * 39 + b".", "nested deeper than 32"),
    (b"\x80\x02]q\x00h\x00a.", "contains itself"),
    (b"\x80\x02}X\x00\x10\x00\x00" + b"k" * 4096 + b"K\x01s.", "4096 characters"),
    (b"\x80\x02\x8a\xff" + b"\x01" * 255 + b".", "integer of 255 bytes"),
    (b"\x80\x02X\xff\xff\xff\x7f.", "ends inside an opcode"),
    (b"\x80\x02ccopyreg\n_reconstructor\n)R.", "copyreg._reconstructor"),
    (b"\x80\x02\x82\x01.", "opcode"),  # EXT1: the copyreg registry
    (b"\x80\x02(lp0\n.", "opcode"),  # protocol 0's text LIST
])
def test_hostile_pickles_are_refused_at_once_in_a_short_line(tmp_path, pickle, words):
    path = _write(tmp_path, pickle=pickle, storages={})
    started = time.monotonic()
    with pytest.raises(FileFormatError) as caught:
        open_torch(path)
    message = str(caught.value)
    assert time.monotonic() - started < 2 and words in message and message.startswith(str(path)), message
    assert len(message) < 400 and caught.value.path == str(path)


def test_limits_are_checked_before_allocating(tmp_path):
    small = TorchLimits(max_tensor_bytes=1024, max_pickle_bytes=256, pickle=PickleLimits(max_objects=50))
    big = _write(tmp_path, {"w": hp.Tensor("0", 8, (1 << 20,), (0,))})
    with pytest.raises(FileFormatError, match="would take more than"):
        open_torch(big, small)
    many = _write(tmp_path, [1] * 60, name="many.pt")
    with pytest.raises(FileFormatError, match="more than 50 values"):
        open_torch(many, small)
    marks = _write(tmp_path, pickle=b"\x80\x02" + b"(" * 60 + b"N.", storages={}, name="marks.pt")
    with pytest.raises(FileFormatError, match="more than 50 values"):  # each MARK keeps a list
        open_torch(marks, small)
    long = _write(tmp_path, "x" * 300, name="long.pt")
    with pytest.raises(FileFormatError, match="data.pkl unpacks to"):
        open_torch(long, small)
    listed = tmp_path / "entries.pt"
    listed.write_bytes(hp.zip_bytes([hp.Entry(f"archive/data/{i}", b"") for i in range(30)]))
    with pytest.raises(FileFormatError, match="lists 30 entries"):
        open_torch(listed, TorchLimits(max_zip_entries=20))


def test_big_endian_and_missing_storages_are_refused(tmp_path):
    root = {"w": hp.Tensor("0", 8, (8,), (1,))}
    missing = _write(tmp_path, root, storages={}, name="missing.pt")
    with pytest.raises(FileFormatError, match="storage 0 is missing"):
        open_torch(missing)
    swapped = tmp_path / "big.pt"
    swapped.write_bytes(hp.zip_bytes([hp.Entry("archive/data.pkl", hp.dumps(root)),
                                      hp.Entry("archive/byteorder", b"big"), hp.Entry("archive/data/0", F32)]))
    with pytest.raises(FileFormatError, match="big-endian"):
        open_torch(swapped)
    odd = _write(tmp_path, {"w": hp.Tensor("../0", 8, (8,), (1,))}, name="odd.pt")
    with pytest.raises(FileFormatError, match="storage key"):
        open_torch(odd)


def test_rows_and_compressed_storages_read_the_same(tmp_path):
    values = np.arange(48, dtype="<f4")
    block, size, crc = hp.repeated_deflate(values.tobytes(), 1)
    root = {"w": hp.Tensor("0", 48, (12, 4), (4, 1)), "z": hp.Tensor("1", 48, (12, 4), (4, 1), 0)}
    path = tmp_path / "rows.pt"
    path.write_bytes(hp.zip_bytes([hp.Entry("archive/data.pkl", hp.dumps(root)),
                                   hp.Entry("archive/data/0", values.tobytes()),
                                   hp.Entry("archive/data/1", deflated=block, size=size, crc=crc)]))
    with open_torch(path) as reader:
        stored, packed = reader.root["w"], reader.root["z"]
        assert np.array_equal(stored.read(), values.reshape(12, 4)) and np.array_equal(packed.read(), stored.read())
        assert np.array_equal(stored.read_rows(3, 4), values.reshape(12, 4)[3:7])
        assert np.array_equal(packed.read_rows(10, 5), values.reshape(12, 4)[10:])


READ_PEAK = r"""
import sys
from frame.engine.io.torch_pickle import open_torch
with open_torch(sys.argv[1]) as reader:
    before = int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1])
    array = reader.root["w"].read()
    after = int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1])
print(after - before)
"""


def test_a_tensor_is_read_into_one_buffer(tmp_path):
    """A stored storage is read straight into the array's buffer: zipfile's readinto went through a
    second copy, so a 253 MB token table would have taken twice that on the Pi."""
    numel = 8 << 20  # 32 MiB of float32
    path = tmp_path / "big.pt"
    path.write_bytes(hp.torch_zip({"w": hp.Tensor("0", numel, (numel,), (1,))}, {"0": bytes(numel * 4)}))
    done = subprocess.run([sys.executable, "-c", READ_PEAK, str(path)], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 40 << 10, f"reading 32 MiB raised the peak by {int(done.stdout) >> 10} MiB"
