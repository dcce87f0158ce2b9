"""frame's comments and docstrings say why the code is as it is, not which issue asked for it: an
"(issue 27)" tells a new maintainer nothing without the tracker, and the history lives in git log and
docs/decisions.md. Tests may cite issues (a regression test names what it guards)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ISSUE_REFERENCE = re.compile(r"\bissues? \d+\b", re.IGNORECASE)


def references_in(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if ISSUE_REFERENCE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    return found


def test_frames_code_names_no_issue_numbers() -> None:
    assert references_in(ROOT / "frame") == []


def test_the_check_finds_a_reference(tmp_path: Path) -> None:
    (tmp_path / "sample.py").write_text('"""Made a child (issue 27)."""\n# see Issues 3 and 4\nx = 1\n')
    assert len(ISSUE_REFERENCE.findall((tmp_path / "sample.py").read_text())) == 2
