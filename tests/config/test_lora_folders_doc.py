"""Issue 40 item 21: docs/loras.md did not say where a LoRA file goes. Its table of folders is read
here and each example path is tried: a file put where the page says is the file a tag finds, in the
page's order (``lora_tags.lora_folders``)."""

from __future__ import annotations

import re
from pathlib import Path

from frame.config import lora_tags

DOC = Path(__file__).resolve().parents[2] / "docs" / "loras.md"


def documented_examples() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Where a LoRA file goes", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [re.findall(r"`([^`]+)`", row)[-1] for row in rows]


def test_every_documented_folder_is_searched_in_the_documented_order(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    examples = documented_examples()
    assert len(examples) == 3, examples
    model = tmp_path / "models" / "sd15"
    model.mkdir(parents=True)
    folders = lora_tags.lora_folders(str(model), str(tmp_path / ".local" / "state" / "frame"))
    paths = [Path(example.replace("~", str(tmp_path), 1)) for example in examples]
    for path in reversed(paths):  # each documented place in turn wins over those after it
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        assert lora_tags.find(lora_tags.LoraRequest(name="woodcut", scale=1.0), folders) == str(path)
