"""The optional ops (``frame.engine.ops.optional``): the lookup's table names exactly what each module
registers, and a fresh process imports a module only when a graph asks for one of its ops — at bind
time, through a kept plan, or for a cost — and then binds and runs it as a core op."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

import frame.engine.ops  # noqa: F401  (fills the registry with the core ops)
from frame.engine import load_model
from frame.engine.ops.lookup import OPTIONAL_MODULES, load_all_optional
from frame.engine.ops.registry import registered_specs
from tests.engine import builders

ROOT = Path(__file__).resolve().parents[3]
OPTIONAL = "frame.engine.ops.optional"


def _fresh(code: str) -> dict:
    """Run ``code`` in a new interpreter from the repository root; it prints one JSON line last."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


LOADED = f"sorted(m for m in sys.modules if m.startswith({OPTIONAL + '.'!r}))"


def test_the_table_names_exactly_what_each_optional_module_registers():
    load_all_optional()
    registered = {}
    for spec in registered_specs():
        module = spec.fn.__module__
        if module.startswith(OPTIONAL + "."):
            assert spec.domain == "", spec
            registered[spec.op_type] = module
    assert registered == OPTIONAL_MODULES
    core = {s.op_type for s in registered_specs() if not s.fn.__module__.startswith(OPTIONAL + ".")}
    assert not core & set(OPTIONAL_MODULES), "an op registered both in the core and as optional"


def test_importing_the_ops_loads_no_optional_module_and_binding_one_loads_only_its_own():
    code = f"""if True:
        import json, sys
        from onnx import helper
        from frame.engine.ops import UnsupportedOp, bind_node
        before = {LOADED}
        errors = []
        for node, opset in ((helper.make_node("NoSuchOp", ["x"], ["y"]), 17),
                            (helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=2), 6)):
            try:
                bind_node(node, opset)
            except UnsupportedOp as exc:
                errors.append(str(exc))
        spec, attrs = bind_node(helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=0), 17)
        print(json.dumps({{"before": before, "errors": errors, "after": {LOADED}, "op": spec.op_type}}))
    """
    found = _fresh(code)
    assert found["before"] == []
    assert found["errors"] == ["op type 'NoSuchOp' (domain 'ai.onnx') is not implemented",
                               "LSTM is implemented from opset 7, model uses 6"]
    assert found["after"] == [f"{OPTIONAL}.recurrent", f"{OPTIONAL}.selection"]
    assert found["op"] == "TopK"


def _topk_lstm_model(path: Path) -> str:
    """x (4, 1, 3) → LSTM (hidden 2) → Y_h (1, 1, 2); x → TopK (k = 2 along axis 0) → values, indices."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((1, 8, 3)).astype(np.float32)
    r = rng.standard_normal((1, 8, 2)).astype(np.float32)
    inits = [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(r, "r"),
             onnx.numpy_helper.from_array(np.array([2], np.int64), "k")]
    nodes = [helper.make_node("LSTM", ["x", "w", "r"], ["", "h"], hidden_size=2, name="lstm"),
             helper.make_node("TopK", ["x", "k"], ["top", "where"], axis=0, name="topk")]
    outputs = [builders.value("h", [1, 1, 2]), builders.value("top", [2, 1, 3]),
               builders.value("where", [2, 1, 3], TensorProto.INT64)]
    proto = builders.model(nodes, [builders.value("x", [4, 1, 3])], outputs, inits)
    return builders.save(proto, path / "model.onnx")


def test_a_graph_with_lstm_and_topk_loads_their_modules_and_runs(tmp_path):
    source = _topk_lstm_model(tmp_path)
    code = f"""if True:
        import json, sys
        import numpy as np
        from frame.engine import load_model
        x = np.arange(12, dtype=np.float32).reshape(4, 1, 3)[::-1].copy() / 10
        model = load_model({source!r})
        out = model.run({{"x": x}})
        print(json.dumps({{"loaded": {LOADED}, "top": out["top"].tolist(), "where": out["where"].tolist(),
                          "h": out["h"].reshape(-1).tolist()}}))
    """
    found = _fresh(code)
    assert found["loaded"] == [f"{OPTIONAL}.recurrent", f"{OPTIONAL}.selection"]
    x = np.arange(12, dtype=np.float32).reshape(4, 1, 3)[::-1] / 10
    np.testing.assert_array_equal(found["top"], x[:2])
    assert found["where"] == [[[0, 0, 0]], [[1, 1, 1]]]
    here = load_model(source).run({"x": x.copy()})  # this process: the same kernels, already loaded
    np.testing.assert_array_equal(np.float32(found["h"]), here["h"].reshape(-1))


def test_a_kept_plan_names_the_optional_kernel_it_needs(tmp_path):
    """The second load reads the plan (no binding): its decoder imports the kernel's module itself."""
    source = _topk_lstm_model(tmp_path)
    code = f"""if True:
        import json, logging, sys
        records = []
        class Keep(logging.Handler):
            def emit(self, record):
                records.append(record.getMessage())
        logging.getLogger("frame").addHandler(Keep())
        logging.getLogger("frame").setLevel(logging.INFO)
        from frame.engine import load_model
        load_model({source!r}, plans={str(tmp_path / "plans")!r})
        print(json.dumps({{"kept": any("(kept plan)" in r for r in records), "loaded": {LOADED}}}))
    """
    assert _fresh(code)["kept"] is False
    again = _fresh(code)
    assert again == {"kept": True, "loaded": [f"{OPTIONAL}.recurrent", f"{OPTIONAL}.selection"]}


def test_an_optional_ops_declared_cost_is_found_without_binding_it_first():
    code = f"""if True:
        import json, sys
        from frame.engine.ops.lookup import declared_cost
        cost = declared_cost("MatMulInteger")
        print(json.dumps({{"work": cost.work is not None, "loaded": {LOADED}}}))
    """
    assert _fresh(code) == {"work": True, "loaded": [f"{OPTIONAL}.integer"]}
