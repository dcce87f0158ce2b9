"""The third layer rule (issue 27): the daemon process never imports numpy, onnx or Pillow.

``tests/test_layers.py`` keeps the import direction; this file checks what the daemon process can
reach at all, on the same import graph (statically: ``frame run`` and every daemon and web module,
followed through every frame import including function-level ones) and at run time (a fresh
interpreter builds the app, serves the pages that used to load them and lists ``sys.modules``,
``tests/daemon_probe.py``). On main 74c5b74 both failed: PIL (thumbnails, uploads), numpy and onnx
(the settings checks through ``frame.worker.checks``).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

from tests.import_graph import MODULES, ROOT, runtime_graph
from tests.test_layers import DAEMON_PROCESS_PARTS, part_of

# Third rule (issue 27): what the daemon process can ever import. ``frame run`` (frame.cli.daemon) and
# every daemon and web module, followed through every frame import they execute (function-level ones
# included: each runs on some page or save), must not reach these; image and model work runs in
# short children (``frame.worker.imagechild``, ``frame.worker.checkchild``).
DAEMON_ROOTS = ("frame.cli.daemon",)
DAEMON_FORBIDDEN = ("numpy", "onnx", "PIL", "pillow_heif", "sklearn", "scipy", "matplotlib", "onnxruntime")


def third_party_imports(module: str) -> set[str]:
    """Top-level names of the non-frame modules ``module`` imports at run time (not TYPE_CHECKING)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for statement in child.orelse:
                    visit(ast.Module(body=[statement], type_ignores=[]))
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name.split(".")[0] for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and not child.level and child.module:
                found.add(child.module.split(".")[0])
            visit(child)

    visit(ast.parse(MODULES[module].read_text(encoding="utf-8")))
    return found - {"frame"}


def daemon_closure_violations() -> list[str]:
    """Each forbidden module the daemon process's static import closure reaches, with one chain."""
    graph = runtime_graph()
    starts = [m for m in MODULES if part_of(m) in DAEMON_PROCESS_PARTS] + list(DAEMON_ROOTS)
    via: dict[str, str | None] = {m: None for m in starts}
    queue = list(starts)
    while queue:
        module = queue.pop(0)
        for nxt in sorted(graph[module]):
            if nxt not in via:
                via[nxt] = module
                queue.append(nxt)
    chains: dict[str, list[list[str]]] = {}
    for module in via:
        for name in sorted(third_party_imports(module) & set(DAEMON_FORBIDDEN)):
            chain, at = [name], module
            while at is not None:
                chain.append(at)
                at = via[at]
            chains.setdefault(name, []).append(chain)
    return [" <- ".join(min(found, key=len)) + f" (and {len(found) - 1} more modules)"
            for name, found in sorted(chains.items())]


def test_the_daemon_process_never_imports_numpy_onnx_or_pillow():
    """Static half of the third rule: no import the daemon can execute leads to numpy, onnx or Pillow
    (the runtime half below serves pages and looks at ``sys.modules``)."""
    assert daemon_closure_violations() == []


def test_the_daemon_process_has_no_numpy_onnx_or_pillow_after_serving_pages(tmp_path):
    """Runtime half of the third rule: a fresh interpreter builds the daemon's app, serves the gallery,
    a thumbnail, the settings page and a save, and a photo upload; then none of them is loaded."""
    from PIL import Image

    (tmp_path / "gallery").mkdir()
    Image.new("RGB", (64, 40), (200, 90, 30)).save(tmp_path / "gallery" / "probe.png")
    Image.new("RGB", (90, 60), (20, 90, 200)).save(tmp_path / "photo.jpg", quality=90)
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "daemon_probe.py"), str(tmp_path),
                           str(tmp_path / "photo.jpg")], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(line.endswith((" 200", " 303")) for line in report["pages"]), report["pages"]
    assert report["forbidden"] == []
