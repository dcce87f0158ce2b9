"""Every hostile file family of issue 40's attack round (items 5-8), through the readers the render
worker uses: a textual-inversion file through ``Embeddings.tokens`` (the prompt's word must stay a
word, with a warning naming the file), a LoRA through ``read_checked`` (one line naming the file).

Each runs in a child process, so a reader that crashes (the old one copied memory outside the file:
SIGSEGV) fails its case instead of killing pytest, and the child reports its peak memory (VmHWM):
bounded well under the Pi worker's 440 MiB whatever the file claims to hold (before: 2-3 GB for the
bombs, 530 MiB for the 42 MB header, hours for the billion-laughs key). The files are made by
``tools/build_hostile_fixtures.py``: the small ones are committed under tests/fixtures/hostile/ (and
checked to be what the tool writes), the big ones written here into a temporary folder.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "hostile"
TOKENIZER = ROOT / "tests" / "fixtures" / "pipelines" / "sd15" / "model" / "tokenizer"
PEAK_MIB = 160  # the check child's cap is 192 MiB, the render worker's 440


def _builder():
    name = "build_hostile_fixtures"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


CASES = {case.name: case for case in _builder().CASES}

PROBE = r"""
import json, sys
from pathlib import Path
reader, path, tokenizer = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
answer = {}
if reader == "embedding":
    from frame.diffusion.textual_inversion import Embeddings
    from frame.diffusion.tokenizer import ClipTokenizer
    tok = ClipTokenizer.from_folder(tokenizer)
    warnings = []
    embeddings = Embeddings([path.parent])
    text = f"a {path.stem} cat"
    tokens = embeddings.tokens(tok, text, "", 32, warnings.append)
    embeddings.cache_key(text)
    words = tok.encode(text)
    answer = {"messages": warnings, "plain": tokens.fixes == [] and tokens.ids[1:1 + len(words)] == words}
else:
    from frame.engine.lora import read_checked
    from frame.errors import UsageError
    try:
        read_checked(path)
        answer = {"messages": []}
    except UsageError as exc:
        answer = {"messages": [str(exc)]}
status = open("/proc/self/status").read().split("\n")
answer["peak_kib"] = int(next(line for line in status if line.startswith("VmHWM")).split()[1])
print(json.dumps(answer))
"""


def _file(case, tmp_path: Path) -> Path:
    folder = tmp_path / "files"
    folder.mkdir()
    if case.big:
        return _builder().write_case(case, folder)
    committed = FIXTURES / case.name
    assert committed.read_bytes() == case.build(), f"{committed} is stale: run tools/build_hostile_fixtures.py"
    target = folder / case.name
    target.write_bytes(committed.read_bytes())
    return target


def test_every_small_case_is_committed_and_nothing_else():
    small = {name for name, case in CASES.items() if not case.big}
    assert {p.name for p in FIXTURES.iterdir()} == small
    assert all(p.stat().st_size <= 200 << 10 for p in FIXTURES.iterdir())


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_hostile_file_is_refused_by_name_within_memory(tmp_path, name):
    case = CASES[name]
    path = _file(case, tmp_path)
    done = subprocess.run([sys.executable, "-c", PROBE, case.reader, str(path), str(TOKENIZER)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"the reader died ({done.returncode}): {done.stderr[-2000:]}"
    answer = json.loads(done.stdout.splitlines()[-1])
    messages = answer["messages"]
    assert len(messages) == 1, messages
    message = messages[0]
    assert str(path) in message and case.words in message, message
    assert "\n" not in message and len(message) < 600 and "Error" not in message.replace("FileFormatError", ""), message
    if case.reader == "embedding":
        assert answer["plain"], "the embedding's word did not stay a plain word"
    assert answer["peak_kib"] < PEAK_MIB << 10, f"peak {answer['peak_kib'] >> 10} MiB"
