"""The daemon process's SQL lives in its store package (``frame.daemon.store``): every other daemon,
web and command-line module asks a named ``Store`` method, so the schema's readers are in one place and a
migration finds every statement it changes. Read with ``ast``: no string constant (f-string parts
included) holding an SQL statement, and no call of ``query``/``execute`` outside the store."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "frame" / "daemon" / "store"
SQL = re.compile(r"\b(SELECT|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX)|"
                 r"DROP\s+TABLE|ALTER\s+TABLE|PRAGMA)\b")
RAW_CALLS = {"query", "execute", "executemany", "executescript"}


def sql_in(path: Path, root: Path = ROOT) -> list[str]:
    """``path:line what`` for each SQL string constant and each raw query call in ``path``, in order."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
            found.append((node.lineno, f"{path.relative_to(root)}:{node.lineno} {node.value[:60]!r}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RAW_CALLS:
            found.append((node.lineno, f"{path.relative_to(root)}:{node.lineno} {ast.unparse(node.func)}(...)"))
    return [hit for _line, hit in sorted(found)]


def daemon_process_modules() -> list[Path]:
    paths = [*(ROOT / "frame" / "daemon").rglob("*.py"), *(ROOT / "frame" / "web").rglob("*.py"),
             *(ROOT / "frame" / "cli").rglob("*.py")]  # the commands read the daemon's store too
    return sorted(p for p in paths if STORE not in p.parents)


def test_no_daemon_or_web_module_outside_the_store_runs_sql() -> None:
    assert [hit for path in daemon_process_modules() for hit in sql_in(path)] == []


def test_the_check_sees_sql_in_a_string_an_f_string_and_a_raw_call(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('rows = store.query(f"SELECT id FROM pictures WHERE id IN ({marks})")\n'
                      'store.execute("UPDATE renders SET status = ?", ("done",))\n'
                      'note = "select a picture to show"\n', encoding="utf-8")
    hits = sql_in(sample, tmp_path)
    assert [hit.split(" ", 1)[0].rsplit(":", 1)[1] for hit in hits] == ["1", "1", "2", "2"]
    assert any("store.query(...)" in hit for hit in hits) and any("UPDATE renders" in hit for hit in hits)
