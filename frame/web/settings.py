"""The settings page's content without Flask: the effective settings and the checks of the file on
disk, the last night estimate, and the form's fields read back as typed values.

The daemon runs with the configuration it loaded at start, which was valid. What the owner needs to
know is whether the *file on disk* is still valid — an edit made since would stop the next start — so
the page re-validates that file now and lists every problem, plus a few advisory notes.

A browser sends strings; ``parse_form`` turns each field's string into the type the schema wants
(numbers, lists one item a line, ``None`` for an empty "automatic" field, the feed rows) before the
same checks as ``frame config check`` run on it (``frame.daemon.settings``). A string that is not a
number at all is refused here, next to its field, with a sentence instead of a type name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from frame.config import Config, estimate_inputs, state_dir, to_plain
from frame.config import fields as owner_fields
from frame.config.fields import FEED_KEYS, Field
from frame.config.loader import config_file_path
from frame.daemon.jobs import config_checks
from frame.errors import FrameError
from frame.install_hints import extra_hint
from frame.redact import redact_text
from frame.statefile import read_json
from frame.web.present import duration

MIB = 1 << 20
MAX_FEEDS = 20
APPLIES = {"now": "applies at once", "next render": "from the next render", "restart": "needs a restart"}


def flatten(plain: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested plain config as ("section.key", "value") rows in file order."""
    rows: list[tuple[str, str]] = []
    if isinstance(plain, dict) and plain:
        for key, value in plain.items():
            rows.extend(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(plain, list) and plain and any(isinstance(v, (dict, list)) for v in plain):
        for index, value in enumerate(plain):
            rows.extend(flatten(value, f"{prefix}[{index}]"))
    else:
        rows.append((prefix, _show(plain)))
    return rows


def grouped(rows: list[tuple[str, str]]) -> list[tuple[str, list[tuple[str, str]]]]:
    """Rows grouped by their top-level section ("general" for top-level keys), in order."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for key, value in rows:
        section, dot, rest = key.partition(".")
        if not dot:
            section, rest = "general", key
        groups.setdefault(section, []).append((rest, value))
    return list(groups.items())


def _show(value: Any) -> str:
    if value is None:
        return "(automatic)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(_show(v) for v in value) if value else "(none)"
    if isinstance(value, dict):
        return "(none)"
    return str(value) if value != "" else '""'


def notes(config: Config) -> list[str]:
    """Advice about settings that are valid but may surprise the owner."""
    found = []
    if config.web.listen.startswith("0.0.0.0:") or config.web.listen.startswith("[::]:"):
        found.append("web.listen: the page is reachable from every device on the network; changes still "
                     "need the owner token.")
    if not config.web.token:
        found.append("web.token: empty, so the daemon generated one at first start (show it with: frame token).")
    if not config.feeds.sources:
        found.append("feeds.sources: no prompt feeds; themes and queued prompts are used.")
    if config.buttons.enabled:
        try:
            import gpiozero  # noqa: F401
        except ImportError:
            found.append(f"buttons.enabled: gpiozero is not installed; {extra_hint('buttons')}.")
    return found


def settings_report(config: Config, config_path: Path | None) -> dict[str, Any]:
    """Rows of effective settings, the file checked, its problems (if any) and advisory notes."""
    # The deep checks read the model's graph: in the check child (frame.daemon.jobs.config_checks), so
    # numpy and onnx never load in the daemon.
    path = config_path or config_file_path(None, os.environ)
    problems: list[str] = []
    if path is not None:
        try:
            found = config_checks.file_problems(Path(path), state_dir(config), config.model.source)
        except FrameError as exc:
            found = [f"the settings could not be checked: {exc}"]
        problems = [redact_text(problem) for problem in found]  # the page is open to the LAN
    return {"sections": grouped(flatten(to_plain(config))), "file": str(path) if path else "", "problems": problems,
            "notes": notes(config), "estimate": last_estimate(config)}


def last_estimate(config: Config) -> dict[str, Any] | None:
    """The last night estimate (``<state_dir>/estimate.json``, written by tonight's render or by
    ``frame estimate --state-dir``): its lines, when and where it was made, tonight's step choice."""

    data = read_json(state_dir(config) / "estimate.json")
    if not isinstance(data, dict) or not isinstance(data.get("lines"), list):
        return None
    made = data.get("made_at")
    when = datetime.fromtimestamp(made).strftime("%Y-%m-%d %H:%M") if isinstance(made, (int, float)) else ""
    choice = data.get("step_choice") if isinstance(data.get("step_choice"), dict) else {}
    changed = estimate_inputs.changed_since(data.get("inputs"), config)
    labels = owner_fields.by_key()
    return {"lines": [redact_text(str(line)) for line in data["lines"]], "when": when,
            "origin": str(data.get("origin") or ""), "step_choice": str(choice.get("sentence") or ""),
            **estimate_verdict(data, config.worker.memory_limit_mb),
            "changed": [labels[key].label.replace(" …", "") if key in labels else key for key in changed or []]}


def _number(value: Any) -> float | None:
    """A figure read back from the file (hostile like every file): a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
        return None
    return float(value)


def estimate_verdict(data: dict, limit_mb: int) -> dict[str, Any]:
    """The estimate's answer first, in the owner's words: ``fits`` (True, False or None: the file has no
    figures) and ``verdict``, e.g. "Fits: about 12 min of the 6 h window, and 138 MB of the worker's
    440 MB (302 MB to spare)."; the multiply-adds and reads stay in the details."""
    peak, seconds, window = (_number(data.get(key)) for key in ("peak_bytes", "seconds_here", "window_seconds"))
    limit = _number(data.get("memory_limit_bytes")) or limit_mb * MIB
    if peak is None or seconds is None or window is None:
        return {"fits": None, "verdict": ""}
    peak_mb, limit_mb_now = round(peak / MIB), round(limit / MIB)
    memory_fits, time_fits = peak <= limit, seconds <= window
    if memory_fits and time_fits:
        return {"fits": True, "verdict": f"Fits: about {duration(seconds)} of the {duration(window)} window, and "
                                         f"{peak_mb} MB of the worker's {limit_mb_now} MB "
                                         f"({limit_mb_now - peak_mb} MB to spare)."}
    problems = []
    if not memory_fits:
        problems.append(f"the night needs {peak_mb} MB, {peak_mb - limit_mb_now} MB more than the worker's "
                        f"{limit_mb_now} MB")
    if not time_fits:
        problems.append(f"it takes about {duration(seconds)}, longer than the {duration(window)} window")
    return {"fits": False, "verdict": f"Does not fit: {' and '.join(problems)}."}


def feed_name(index: int, key: str) -> str:
    return f"feeds.sources-{index}-{key}"


def parse_form(form: Mapping[str, str], locked: set[str]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """(field key → typed value, field key → problems) for every field on the form that an
    environment variable does not fix (those are shown disabled, so the browser sends nothing)."""
    changes: dict[str, Any] = {}
    problems: dict[str, list[str]] = {}
    for spec in owner_fields.FIELDS:
        if spec.key in locked:
            continue
        try:
            if spec.kind == "feeds":
                changes[spec.key] = _feeds(form)
            elif spec.kind == "bool":
                changes[spec.key] = form.get(spec.key) == "on"
            elif spec.key in form:
                changes[spec.key] = _value(spec, str(form[spec.key]))
        except ValueError as exc:
            problems.setdefault(spec.key, []).append(str(exc))
    return changes, problems


def _value(spec: Field, raw: str) -> Any:
    text = raw.strip()
    if spec.kind == "lines":
        return [line.strip() for line in raw.splitlines() if line.strip()]
    if spec.kind in ("int", "float", "select") and text == "" and spec.optional:
        return None
    if spec.kind == "int":
        if not text.lstrip("-").isdigit() or not text.isascii():
            raise ValueError(f"must be a whole number, got {text!r}")
        return int(text)
    if spec.kind == "float":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"must be a number, got {text!r}") from None
    if spec.kind == "select":
        return next((choice for choice in spec.choices if str(choice) == text), text)
    if spec.kind == "secret":
        return raw  # whitespace is the secret's own; empty keeps the stored one
    return text


def _feeds(form: Mapping[str, str]) -> list[dict[str, Any]]:
    """The feed rows; a row whose URL is empty is dropped (how a feed is removed)."""
    rows = []
    for index in range(MAX_FEEDS + 1):
        if feed_name(index, "url") not in form:
            break
        row: dict[str, Any] = {key: str(form.get(feed_name(index, key), "")).strip() for key in FEED_KEYS}
        if not row["url"]:
            continue
        try:
            row["weight"] = float(row["weight"] or 1.0)
        except ValueError:
            raise ValueError(f"feed {index + 1}: weight must be a number, got {row['weight']!r}") from None
        rows.append(row)
    return rows


def form_rows(current: dict[str, Any], submitted: Mapping[str, Any] | None) -> list[tuple[str, list[dict]]]:
    """The groups of fields as the template draws them: value (what was sent, after a refused save),
    origin, locked, when it applies."""
    rows = []
    for group, specs in owner_fields.groups():
        items = []
        for spec in specs:
            info = current["values"][spec.key]
            value = info["value"]
            if submitted is not None and spec.key in submitted and spec.kind != "secret":
                value = submitted[spec.key]
            items.append({"spec": spec, "value": _display(spec, value), "origin": info["origin"],
                          "locked": info["locked"], "set": info["set"], "applies": APPLIES[spec.applies],
                          "id": "f-" + spec.key.replace(".", "-")})
        rows.append((group, items))
    return rows


def _display(spec: Field, value: Any) -> Any:
    if spec.kind == "lines":
        return "\n".join(str(v) for v in value or [])
    if spec.kind == "feeds":
        return list(value or []) + [dict.fromkeys(FEED_KEYS, "") | {"format": "json", "weight": 1.0}]
    if value is None:
        return ""
    return value
