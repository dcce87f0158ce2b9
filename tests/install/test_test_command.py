"""README's test command is the one CI runs, and the test extras install every plugin it uses.

The command runs the suite on two worker processes (pytest-xdist's ``-n``): if README and ``.ci/run``
drifted apart, CI would time a different run than owners get; without pytest-xdist in the ``test``
extra, ``pytest -n 2`` stops at once with "unrecognized arguments".
"""

from __future__ import annotations

import configparser
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_test_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text[text.index("Run the whole test suite:"):]
    match = re.search(r"```sh\n(.+?)\n```", after)
    assert match, "README's 'Run the whole test suite:' has no sh block"
    return match.group(1)


def _pytest_arguments(command: str) -> list[str]:
    words = shlex.split(command.split("&&")[-1])
    return words[words.index("pytest") + 1:]


def test_ci_runs_readmes_test_command_verbatim():
    command = _readme_test_command()
    lines = [line.strip() for line in (ROOT / ".ci/run").read_text(encoding="utf-8").splitlines()]
    assert command in lines, f".ci/run does not run README's test command: {command}"


def test_the_test_extra_installs_xdist_when_the_command_runs_workers():
    arguments = _pytest_arguments(_readme_test_command())
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    test_extra = [line.split(">")[0].split("=")[0].strip() for line in
                  parser["options.extras_require"]["test"].splitlines() if line.strip()]
    assert "-n" in arguments and "pytest-xdist" in test_extra
    assert arguments[arguments.index("-n") + 1] == "2", "CI has 2 cores: more workers only compete for them"
