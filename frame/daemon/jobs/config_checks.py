"""The settings checks that read the model's graph, asked of the check child.

``frame.worker.checks`` applies the rules of the configured model, which means ``frame.diffusion``'s
pipeline and the UNet's graph: numpy and onnx, +36.6 MiB in the daemon for good after the first view
of the settings page. The daemon now hands the settings to ``python -m frame.worker.checkchild``
(``frame.daemon.jobs.children``: one at a time, capped at ``CHECK_CAP_MB``) and keeps the answer for
the same settings, files and model folder (their sizes and times) for up to ``KEEP_SECONDS``, at most
``KEEP_ANSWERS`` answers of a few lines each: the child takes 2.3 s here, much longer on a Pi Zero 2.

* ``file_problems(path)``: what ``frame config check`` says of the file (schema and deep checks, with
  the environment and the owner layer), as its problem lines: the settings page's report.
* ``queued_problems(config, state_dir, prompt)`` and ``size_rule(config, state_dir)``: the model's rules for a
  queued prompt's own settings, and its size rule in words (the queue form and API).
* ``lora_findings(config, state_dir, texts)``: a queued prompt's LoRA files read (NaN/inf, malformed)
  and matched against the model ("matched 0 layers"), as (problems, warnings).
* ``deep_problems(config, state_dir)``: the deep checks of exactly ``config`` (what a save would make
  the settings), as (key path, message): written, secrets included, into a private job folder that is
  removed at once, as for a worker.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from frame.atomicfile import make_dirs, write_bytes_atomic
from frame.config import lora_tags
from frame.config.loader import to_plain
from frame.config.schema import Config
from frame.daemon.jobs.children import CHECK_CAP_MB, WAIT_SECONDS, ChildBusy, run_child
from frame.errors import UsageError
from frame.models import resolve_model_source
from frame.worker.shortjobs import CheckJob, CheckOutput, KeyPath

KEEP_SECONDS = 3600.0
KEEP_ANSWERS = 8
CHECK_SECONDS = 300.0  # reading an SD 1.5 UNet graph on a Pi Zero 2 takes tens of seconds
_answers: dict[str, tuple[float, CheckOutput]] = {}
_lock = threading.Lock()


def _asked(key: str, job: CheckJob) -> CheckOutput:
    """The kept answer for ``key``, or the child's. One question at a time: four page loads of the
    settings page at once start one child, and the other three take its answer."""
    if not _lock.acquire(timeout=WAIT_SECONDS):
        raise ChildBusy("the frame is busy checking settings; try again in a minute")
    try:
        now = time.monotonic()
        for stale in [k for k, (when, _) in _answers.items() if now - when > KEEP_SECONDS]:
            del _answers[stale]
        if key in _answers:
            return _answers[key][1]
        result = run_child(job, timeout=CHECK_SECONDS)
        if not isinstance(result, CheckOutput):
            raise TypeError(f"the check child answered a {result.kind} job")
        _answers[key] = (time.monotonic(), result)
        while len(_answers) > KEEP_ANSWERS:
            del _answers[min(_answers, key=lambda k: _answers[k][0])]
        return result
    finally:
        _lock.release()


def _stamp(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return "-"
    return f"{stat.st_mtime_ns}:{stat.st_size}"


def model_stamp(source: str) -> str:
    """What changes when a model folder is copied in or replaced (a URL is checked when it loads)."""
    folder = Path(resolve_model_source(source)).expanduser()
    if "://" in source:
        return source
    return ":".join(_stamp(p) for p in (folder, folder / "model_index.json", folder / "unet" / "model.onnx"))


def file_problems(path: Path, state_dir: Path, model_source: str) -> list[str]:
    """``frame config check``'s problem lines for the configuration file ``path`` (empty: none);
    ``model_source`` is the running configuration's, whose folder's changes are seen at once."""
    key = (f"file:{path}:{_stamp(Path(path))}:{_stamp(Path(state_dir) / 'settings.yaml')}:"
           f"{model_stamp(model_source)}")
    return list(_asked(key, CheckJob(config=Path(path), what="file", cap_mb=CHECK_CAP_MB)).lines)


def _ask_about(config: Config, state_dir: Path, what: str, prompt: Mapping[str, Any] | None = None) -> CheckOutput:
    """The check child's answer about exactly ``config`` (kept for the same settings, prompt and model):
    written, secrets included, into a private job folder that is removed at once, as for a worker."""
    plain = to_plain(config, reveal_secrets=True)
    plain["web"]["token"] = ""  # the checks never need the owner token
    text = yaml.safe_dump(plain, sort_keys=True, allow_unicode=True)
    digest = hashlib.sha256(text.encode()).hexdigest()
    asked = json.dumps(prompt, sort_keys=True) if prompt is not None else ""
    key = f"{what}:{digest}:{asked}:{model_stamp(config.model.source)}"
    folder = Path(state_dir) / "checkpoints" / f"child-check-{digest[:12]}-{threading.get_ident()}"
    make_dirs(folder)
    try:
        write_bytes_atomic(folder / "config.yaml", text.encode())
        return _asked(key, CheckJob(config=folder / "config.yaml", what=what, cap_mb=CHECK_CAP_MB,  # type: ignore[arg-type]
                                    prompt=prompt))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def deep_problems(config: Config, state_dir: Path) -> list[tuple[KeyPath, str]]:
    """``frame.worker.checks.deep_problems`` of ``config``, run in the check child."""
    return list(_ask_about(config, state_dir, "config").problems)


def queued_problems(config: Config, state_dir: Path, prompt: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """``frame.worker.checks.queued_problems`` of a queued prompt's own settings (field, message), run in
    the check child; None when the model cannot be asked without loading it (behind a URL)."""
    answer = _ask_about(config, state_dir, "prompt", dict(prompt))
    if not answer.model_known:
        return None
    return [(path[0], message) for path, message in answer.problems]


def lora_findings(config: Config, state_dir: Path, texts: list[str]) -> tuple[list[str], list[str]]:
    """(problems, warnings) of the LoRA files the ``<lora:…>`` tags of ``texts`` name
    (``frame.worker.lora_checks``), run in the check child; the answer is kept while the files and the
    model are unchanged (their sizes and times are part of the question)."""
    folders = lora_tags.configured_folders(config)
    files, names = {}, set()
    for text in texts:
        for request in lora_tags.split_tags(text)[1]:
            names.add(request.name)
            try:
                path = lora_tags.find(request, folders)
            except UsageError:
                continue  # named by the child's answer
            files[path] = _stamp(Path(path))
    # asked by name only (the scales were checked here), so the next prompt naming them takes this answer
    tags = " ".join(f"<lora:{name}>" for name in sorted(names))
    answer = _ask_about(config, state_dir, "loras", {"texts": [tags], "files": files})
    return [message for _, message in answer.problems], list(answer.lines)


def size_rule(config: Config, state_dir: Path) -> str | None:
    """The configured model's size rule in words for the queue form (None: behind a URL)."""
    return _ask_about(config, state_dir, "prompt", {}).size_rule


def night_size(config: Config, state_dir: Path) -> str | None:
    """Tonight's picture size, "672x400", for the queue form's hint (None: behind a URL)."""
    return _ask_about(config, state_dir, "prompt", {}).night_size
