"""Imports point down the layers (issue 15). Every module's imports are read with ``ast`` — top-level,
inside functions and under ``TYPE_CHECKING`` alike, plus ``importlib.import_module("frame...")`` with a
literal name (``tests/import_graph.py`` reads them) — and checked against one rule over module prefixes:

    cli (frame.cli, frame.__main__)                                               8
    web (frame.web)    serve (frame.serve: ``frame serve-render``)                7
    daemon (frame.daemon: the daemon process's parts;                             6
            its http/ (the JSON API) stands on actions/ (the owner actions))
    worker (frame.worker: the render/show worker process)                         5
    remote (frame.remote: the AUTOMATIC1111 client)                               4
    estimate (frame.estimate: graph counts, machine probes, Pi projection)        4
    diffusion (frame.diffusion)    convert (frame.convert)                        3
    engine (frame.engine)  display (frame.display)  taste (frame.taste)  buttons  2
    config (frame.config)                                                         1
    base (frame, frame.errors, frame.atomicfile, frame.statefile, frame.models,
          frame.net, frame.install_hints, frame.seeds, frame.lazy, frame.jsonlimits,
          frame.registry, frame.redact, frame.memory_budget, frame.recordcodec) 0

A module belongs to the part whose prefix matches it (``frame`` only matches the package itself).
It may import its own part and any part of a lower level; never a part of its own level or above.
Second rule, for the daemon process (which must stay at ~45 MiB: no numpy, onnx, scikit-learn,
matplotlib): daemon and web modules import nothing from engine, diffusion, display, taste, convert,
remote or serve, and from the worker only ``frame.worker.records``, ``frame.worker.events`` (the job, choice, events and
results the processes exchange) and ``frame.worker.shortjobs`` (the same for the short children that decode
uploads, make thumbnails and run the model checks). Third rule (issue 27): what the daemon process can
import at all (``frame run`` and every daemon and web module, followed through every frame import)
reaches no numpy, onnx or Pillow, checked statically and by serving pages in a fresh interpreter
(``tests/test_daemon_imports.py``, on this module's import graph).

Fifth rule: the engine never sees the configuration, so it imports nothing of ``frame.config``
(``CONFIG_FREE_PARTS``); what both need (the generic ``Registry``, URL redaction, the worker's default
memory limit) lives in the base layer.

Fourth rule (issue 30): the owner's actions are written once, in ``frame.daemon.actions``, which both
the JSON API (``frame.daemon.http``) and the phone pages (``frame.web``) call. Those two never call
what changes the queue, a rating, a picture, the settings or the panel themselves (``OWNER_CHANGES``),
and the actions import no web framework and nothing of their callers but ``http.contract``.

``UNPLACED`` places today's top-level modules that no prefix covers yet; each entry is deleted when its
module moves (a stale entry fails ``test_unplaced_entries_still_exist``), so at the end it is empty.
``LAZY_IMPORTS`` lists the function-level imports that stay, each with its measured reason.

State (issue 15, steps 0-13 and the imports of step 14 done): rules 1 and 2, the no-cycle rule and the
function-level rule hold and all four are plain tests (step 14 hoisted the "top" imports of plan-15.md
section 1.1 and listed the lazy ones here). ``python tests/test_layers.py`` prints the current list, to
refresh this docstring:

Rule 1 (direction), 0:
Rule 2 (daemon process), 0:
Rule 5 (engine without config), 0:
Cycles (runtime imports, function-level included), 0:
Function-level imports outside the CLI and not in LAZY_IMPORTS, 0 (listed in plan-15.md)

How they were fixed (plan-15.md, sections 2-4): steps, tastechoice and the worker half of infoscreen
went to frame/worker/, config/deep.py and config/model_rules.py to frame/worker/checks.py and
model_rules.py, estimate/nightly.py to frame/worker/step_choice.py; feedhttp, server and ratelimit to
frame/net/; diffusion/seeds.py to frame/seeds.py (the daemon draws seeds); the web <-> daemon cycle
through frame/daemon/http/contract.py (the daemon is handed the pages by ``frame run``) and
frame/web/context.py; the engine cycles by moving SourceTruncated and NodeError to engine/errors.py,
Scope to executor.py and spatial_params to ops/conv_im2col.py; render <-> step_choice by
frame/worker/pipeline.py.
"""

from __future__ import annotations

import ast

from tests.import_graph import MODULES, ROOT, Import, all_imports, function_level_imports, import_cycles, imports_of

# (part, level, prefixes): lowest level first.
PARTS: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("base", 0, ("frame", "frame.clock", "frame.errors", "frame.atomicfile", "frame.statefile", "frame.models",
                 "frame.net", "frame.install_hints", "frame.seeds", "frame.lazy", "frame.jsonlimits",
                 "frame.registry", "frame.redact", "frame.memory_budget", "frame.recordcodec")),
    ("config", 1, ("frame.config",)),
    ("engine", 2, ("frame.engine",)),
    ("display", 2, ("frame.display",)),
    ("taste", 2, ("frame.taste",)),
    ("buttons", 2, ("frame.buttons",)),
    ("diffusion", 3, ("frame.diffusion",)),
    ("convert", 3, ("frame.convert",)),
    ("remote", 4, ("frame.remote",)),
    ("estimate", 4, ("frame.estimate",)),
    ("worker", 5, ("frame.worker",)),
    ("daemon", 6, ("frame.daemon",)),
    ("web", 7, ("frame.web",)),
    ("serve", 7, ("frame.serve",)),
    ("cli", 8, ("frame.cli", "frame.__main__")),
)
LEVEL = {part: level for part, level, _ in PARTS}

# Parts whose code never runs in the daemon process, and what of the worker the daemon may import.
HEAVY_PARTS = ("engine", "diffusion", "display", "taste", "convert", "remote", "serve")
DAEMON_PROCESS_PARTS = ("daemon", "web")
WORKER_MODULES_FOR_THE_DAEMON = ("frame.worker.records", "frame.worker.events", "frame.worker.shortjobs")
# Parts above config that import nothing of it (the fifth rule).
CONFIG_FREE_PARTS = ("engine",)

# Today's top-level modules that no prefix places yet, with the part they move to (plan-15.md,
# "old path -> new path"). Delete each entry when its module moves; at the end this is empty.
UNPLACED: dict[str, str] = {
}


def part_of(module: str) -> str | None:
    """The part a module belongs to: its longest matching prefix, else ``UNPLACED``."""
    best, length = UNPLACED.get(module), -1
    for part, _level, prefixes in PARTS:
        for prefix in prefixes:
            matches = module == prefix if prefix == "frame" else module == prefix or module.startswith(prefix + ".")
            if matches and len(prefix) > length:
                best, length = part, len(prefix)
    return best


def describe(imp: Import) -> str:
    return imp.describe(part_of)


def direction_violations() -> list[Import]:
    """Rule 1: an import of a part of the same level (other than its own part) or above."""
    bad = []
    for imp in all_imports():
        source, target = part_of(imp.source), part_of(imp.target)
        if source is None or target is None or source == target:
            continue
        if LEVEL[target] >= LEVEL[source]:
            bad.append(imp)
    return bad


def daemon_process_violations() -> list[Import]:
    """Rule 2: daemon and web modules stay clear of the worker-only parts."""
    bad = []
    for imp in all_imports():
        source, target = part_of(imp.source), part_of(imp.target)
        if source not in DAEMON_PROCESS_PARTS or source == target:
            continue
        if target in HEAVY_PARTS:
            bad.append(imp)
        elif target == "worker" and not any(imp.target == m or imp.target.startswith(m + ".")
                                            for m in WORKER_MODULES_FOR_THE_DAEMON):
            bad.append(imp)
    return bad


def config_import_violations() -> list[Import]:
    """Fifth rule: the engine imports nothing of ``frame.config``."""
    return [imp for imp in all_imports()
            if part_of(imp.source) in CONFIG_FREE_PARTS and part_of(imp.target) == "config"]


# Function-level imports outside the CLI, each with the measured reason it stays lazy (plan-15.md,
# section 1.1). CLI handlers (``frame.cli.*``) import what they run inside the handler: every command
# module is imported by ``frame --help`` (0.094 s CPU, 17.5 MiB on 7de3f48; yaml the only third-party
# module), and ``frame run`` is the daemon process. Keys: (importing module, imported module prefix).
LAZY_IMPORTS: dict[tuple[str, str], str] = {
    ("frame.buttons.dispatch", "gpiozero"): "optional extra frame[buttons], only when buttons.enabled",
    ("frame.buttons.dispatch", "frame.buttons.gpiod_pins"): "imports gpiozero (optional extra)",
    ("frame.worker.checks", "frame.diffusion.onnxstream_layout"): "onnx+numpy +36.8 MiB/0.68 s in frame config "
                                                                   "check and the check child; only OnnxStream folders",
    ("frame.daemon.feeds.parse", "feedparser"): "+8.9 MiB in the daemon; only rss feeds",
    ("frame.worker.lora_checks", "frame.engine.lora"): "the check child's settings jobs stay at 35 MiB without "
                                                       "the engine; only a queued prompt's LoRAs read it",
    ("frame.worker.lora_checks", "frame.engine.model"): "onnx in the check child; only a queued prompt's LoRAs "
                                                        "are matched against the model's graphs",
    ("frame.daemon.service", "frame.daemon.mqtt.bridge"): "paho-mqtt +0.7 MiB in the daemon; only when mqtt.host "
                                                          "is set",
    ("frame.worker.choose", "frame.taste.plots"): "matplotlib +38.8 MiB/0.46 s; only when the model chose",
    ("frame.diffusion.model_check", "frame.engine.model"): "onnx +20.8 MiB/0.62 s in frame config check; only "
                                                           "for a local diffusers folder",
    ("frame.diffusion.model_check", "frame.diffusion.vae.shapes"): "as frame.engine.model",
    ("frame.diffusion.model_files", "requests"): "+9.8 MiB in every render worker; only for a model URL",
    ("frame.engine.blas_threads", "threadpoolctl"): "not a declared dependency: no thread control without it",
    ("frame.engine.io.sources", "frame.engine.io.http"): "requests +13.4 MiB/0.11 s; only for a URL source",
    ("frame.engine.onnxstream.source", "frame.engine.io.http"): "as engine.io.sources",
    ("frame.diffusion.encoder_identity", "frame.engine.io.http"): "as engine.io.sources; only for a model URL",
    ("frame.diffusion.encoder_identity", "frame.engine.model"): "onnx +20.0 MiB/0.56 s in the render worker "
                                                                "(as frame.diffusion.configured); only for a model URL",
    ("frame.serve.render.engines", "onnxruntime"): "optional extra frame[desktop]",
    ("frame.taste.classifier", "sklearn.neighbors"): "+14.3 MiB; only the faithful reference kNN",
    ("frame.taste.classifier", "frame.taste.plots"): "matplotlib +38.8 MiB; only to draw",
    ("frame.taste.plot_data", "sklearn"): "scikit-learn+scipy +80 MiB; the plot child reads PlotData without it",
    ("frame.taste.picker", "frame.taste.classifier"): "scikit-learn +118 MiB/1.06 s; only once the model decides",
    ("frame.taste.search", "sklearn"): "+126 MiB; only the faithful cross-validation",
    ("frame.web.settings", "gpiozero"): "whether the optional extra is installed is the question",
    ("frame.diffusion.configured", "frame.diffusion.pipeline"): "onnx +20.0 MiB/0.56 s in every render worker (over "
                                                                "its numpy+Pillow); only once it paints locally",
    ("frame.diffusion.configured", "frame.diffusion.onnxstream_layout"): "the engine's OnnxStream reader (numpy); "
                                                                         "only for the checks' graph reading",
    ("frame.diffusion.model_files", "frame.engine.io.small_files"): "requests +13.5 MiB/0.07 s; only for a model "
                                                                    "URL",
    ("frame.diffusion.model_files", "frame.engine.io.http"): "as small_files (requests); only for a model URL",
    ("frame.diffusion.onnxstream_layout", "frame.engine.io.small_files"): "as model_files; only for an OnnxStream "
                                                                          "URL",
    ("frame.diffusion.rules", "frame.diffusion.samplers"): "numpy +13.1 MiB/0.09 s in frame config check and the "
                                                           "check child (worker.checks -> model_rules -> rules)",
    ("frame.estimate.machine", "requests"): "+9.5 MiB/0.04 s; only to time a URL model's download rate",
    ("frame.taste.classifier", "sklearn.model_selection"): "+7.2 MiB/0.07 s; only for the inner-CV mode selection",
    ("frame.worker.choose", "matplotlib"): "whether the optional plots extra is installed is the question (+38.8 MiB)",
    ("frame.worker.model_rules", "frame.diffusion.pipeline"): "onnx+numpy+Pillow +36.6 MiB/0.71 s in frame config "
                                                              "check, the check child; only a local model folder",
    ("frame.worker.remote_step", "frame.remote.render"): "requests +8.6 MiB/0.06 s in every render worker; "
                                                         "only for the remote backend",
    ("frame.worker.remote_step", "frame.remote.comfy_render"): "requests +9.8 MiB/0.27 s in every render worker; "
                                                               "only for the comfyui backend",
    ("frame.worker.checks", "frame.remote.comfyui"): "numpy+Pillow +16.1 MiB/0.24 s in frame config check; only "
                                                     "with a render.remote.workflow file",
    ("frame.worker.step_choice", "frame.engine.model"): "onnx+numpy +30.4 MiB/0.58 s in every render worker "
                                                        "(render imports step_choice); only once a pipeline is loaded",
    ("frame.worker.step_choice", "frame.estimate"): "as frame.engine.model (+35.3 MiB/0.71 s); only with a deadline",
    ("frame.worker.pipeline", "frame.diffusion.configured"): "in a try: an ImportError becomes StepUnavailable "
                                                             "(generate), the worker's missing-dependency report",
    ("frame.worker.pipeline", "frame.estimate.vae"): "as frame.worker.step_choice's frame.estimate; only "
                                                            "once a pipeline is loaded (the VAE tiles' counter)",
    ("frame.worker.render", "frame.display"): "in a try: an ImportError becomes StepUnavailable (prepare), "
                                              "the worker's missing-dependency report",
    ("frame.worker.show", "PIL"): "in a try: an ImportError becomes StepUnavailable (show)",
    ("frame.worker.imagechild", "pillow_heif"): "optional HEIC plugin (pip install pillow-heif); libheif only when "
                                                "asked",
    ("frame.worker.show", "frame.display"): "as PIL (numpy+Pillow +15.7 MiB/0.10 s with it)",
}


def unlisted_lazy_imports() -> list[str]:
    bad = []
    for module, target, path, line in function_level_imports():
        if part_of(module) == "cli":
            continue
        if not any(module == source and (target == prefix or target.startswith(prefix + "."))
                   for source, prefix in LAZY_IMPORTS):
            bad.append(f"{path.relative_to(ROOT)}:{line} {module} imports {target} inside a function")
    return bad


# Rule 4 (issue 30): the owner-action layer and the calls only it makes on the store, the queue's rules,
# deletion, the settings editor and the running daemon.
OWNER_ACTIONS = "frame.daemon.actions"
OWNER_ACTION_CALLERS = ("frame.daemon.http", "frame.web", "frame.daemon.mqtt")
OWNER_CHANGES = {"queue_prompt", "update_prompt", "move_prompt", "remove_prompt", "rate", "queue_reuse",
                 "queue_variation", "delete_picture", "restore_previous", "apply_settings", "request_restart",
                 "render_now", "show"}


def owner_action_violations() -> list[str]:
    """Rule 4: an API or page module calling an ``OWNER_CHANGES`` name other than through the actions,
    or an actions module importing flask, werkzeug, the web or the API (``http.contract`` aside)."""
    bad = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if module.startswith(OWNER_ACTIONS):
            bad += [f"{module}:{imp.line} imports {imp.target}" for imp in imports_of(module)
                    if imp.target.startswith(OWNER_ACTION_CALLERS) and imp.target != "frame.daemon.http.contract"]
            bad += [f"{module}:{node.lineno} imports {name}" for node in ast.walk(tree)
                    for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else
                                 [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                    if name.split(".")[0] in ("flask", "werkzeug")]
        elif module.startswith(OWNER_ACTION_CALLERS):
            actions = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                       and (node.module or "").startswith(OWNER_ACTIONS) for alias in node.names}
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                through = isinstance(func, ast.Attribute) and getattr(func.value, "id", None) in actions
                if name in OWNER_CHANGES and not through and name not in actions:
                    bad.append(f"{module}:{node.lineno} calls {name}() itself, not through {OWNER_ACTIONS}")
    return bad


def test_every_module_has_a_part():
    """A new module must be placed in the rule (or in ``UNPLACED`` while the step is under way)."""
    assert [m for m in MODULES if part_of(m) is None] == []


def test_unplaced_entries_still_exist():
    """An entry of ``UNPLACED`` whose module has moved is stale: delete it."""
    assert [m for m in UNPLACED if m not in MODULES] == []


def test_imports_point_down_the_layers():
    assert [describe(imp) for imp in direction_violations()] == []


def test_daemon_process_modules_import_no_worker_only_part():
    assert [describe(imp) for imp in daemon_process_violations()] == []


def test_the_engine_imports_nothing_of_the_configuration():
    assert [describe(imp) for imp in config_import_violations()] == []


def test_no_import_cycles():
    assert import_cycles() == []


def test_the_api_and_the_pages_change_things_only_through_the_owner_actions():
    assert owner_action_violations() == []


def test_function_level_imports_are_the_listed_ones():
    """An import inside a function is a cycle dodged or a measured cost: the second kind is listed in
    ``LAZY_IMPORTS`` with its reason, the first kind is not allowed."""
    assert unlisted_lazy_imports() == []


if __name__ == "__main__":  # print the current violations (to refresh the docstring)
    for title, rows in (("Rule 1 (direction)", direction_violations()),
                        ("Rule 2 (daemon process)", daemon_process_violations()),
                        ("Rule 5 (engine without config)", config_import_violations())):
        print(f"{title}, {len(rows)}:")
        for imp in rows:
            print(f"  {describe(imp)}")
    cycles = import_cycles()
    print(f"Cycles (runtime imports, function-level included), {len(cycles)}:")
    for group in cycles:
        print(f"  {' <-> '.join(group)}")
    lazy = unlisted_lazy_imports()
    print(f"Function-level imports outside the CLI and not in LAZY_IMPORTS, {len(lazy)} (listed in plan-15.md)")
