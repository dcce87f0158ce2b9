"""Editing the owner layer (``settings.yaml``): what the settings page and ``/api/settings`` show, check
and save. The page and the API share this, so both give the same answers.

A change is checked exactly as ``frame config check`` checks a file (the schema, then the deep
checks of ``frame.worker.checks``, run in the check child: ``frame.daemon.jobs.config_checks``), with
the proposed owner layer in place, and every problem is
tied to the field it belongs to. ``settings.yaml`` keeps only values that differ from the layers
below it (defaults and the configuration file): setting a field back to the file's value removes it.

Secrets never travel to the browser: ``model.token`` is shown as set or not, and an empty answer
keeps it. URLs that may carry credentials are shown redacted; sending the redacted text back
unchanged keeps the stored URL, so a save never writes ``***`` into a URL.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frame.config import fields as owner_fields
from frame.config import lora_tags, owner
from frame.config.loader import Layers, read_layers, resolve, to_plain
from frame.config.schema import Config
from frame.config.validate import format_path
from frame.daemon.jobs import config_checks
from frame.errors import FrameError
from frame.redact import redact_text, redact_url

GENERAL = ""  # the key of problems that belong to no field on the page


@dataclass
class Proposal:
    """A checked change: the owner layer it would write, the configuration it gives, problems per
    field key (``GENERAL`` for the rest) and the keys that differ from what is in effect now."""

    owner_data: dict
    config: Config | None
    problems: dict[str, list[str]] = field(default_factory=dict)
    others: list[str] = field(default_factory=list)  # problems already there, not caused by this change
    changed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "problems": self.problems, "other_problems": self.others, "changed": self.changed}


def field_for(path: tuple) -> str:
    """The page's field key a problem's key path belongs to (``feeds.sources[2].url`` →
    ``feeds.sources``), or ``GENERAL``."""
    keys = owner_fields.by_key()
    names = tuple(str(p) for p in path if not isinstance(p, int))
    for n in range(len(names), 0, -1):
        if ".".join(names[:n]) in keys:
            return ".".join(names[:n])
    return GENERAL


def _item(path: tuple, key: str) -> str:
    """Which part of a field a problem is about, as the page shows it: ``line 3: `` of a one-per-line
    list (``taste.themes[2]``), ``feed 1, name: `` of a feed row; ``""`` for the field itself."""
    rest = path[len(key.split(".")):] if key != GENERAL else ()
    if len(rest) == 1 and isinstance(rest[0], int):
        return f"line {rest[0] + 1}: "
    if len(rest) == 2 and isinstance(rest[0], int):
        return f"feed {rest[0] + 1}, {rest[1]}: "
    return ""


class SettingsEditor:
    """The owner layer of one configuration (``config_path`` and ``environ`` as ``load_config`` takes;
    ``state_dir``: the running daemon's state folder, else the one the file and environment name)."""

    def __init__(self, config_path: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None,
                 state_dir: str | os.PathLike | None = None) -> None:
        self.config_path = config_path
        self.environ = dict(os.environ if environ is None else environ)
        self._state_dir = state_dir

    def _layers(self) -> Layers:
        return read_layers(self.config_path, self.environ, owner_dir=self._state_dir)

    def _resolve(self, **options: Any) -> Any:
        return resolve(self.config_path, self.environ, owner_dir=self._state_dir, **options)

    def state_dir(self) -> Path:
        if self._state_dir is not None:
            return Path(self._state_dir)
        return Path(str(self._layers().below_owner().get("state_dir", Config.state_dir))).expanduser()

    # what the page shows ---------------------------------------------------------------------------

    def current(self) -> dict[str, Any]:
        """Every field's value in effect (secrets hidden), where it comes from, whether an environment
        variable fixes it, and whether a previous version can be restored."""
        resolved = self._resolve()
        plain = to_plain(resolved.config, reveal_secrets=True)
        values = {}
        for spec in owner_fields.FIELDS:
            value = owner.get_path(plain, spec.path)[1]
            origin = resolved.layers.origin(spec.path)
            values[spec.key] = {"value": _shown(spec, value), "origin": origin,
                                "locked": origin.startswith("from environment variable"),
                                "set": bool(value) if spec.kind == "secret" else None,
                                "applies": spec.applies}
        state = self.state_dir()
        return {"values": values, "file": resolved.source, "settings_file": str(owner.settings_path(state)),
                "previous": owner.previous_path(state).is_file(),
                "owner_problems": [redact_text(p) for p in resolved.owner_problems]}

    # checking and saving ---------------------------------------------------------------------------

    def propose(self, changes: Mapping[str, Any]) -> Proposal:
        """Check ``changes`` (field key → typed value, as the JSON API takes them) against every rule."""
        layers = self._layers()
        keys = owner_fields.by_key()
        below = to_plain(self._resolve(with_owner=False).config, reveal_secrets=True)
        now = to_plain(self._resolve().config, reveal_secrets=True)
        data = copy.deepcopy(layers.owner.data) if layers.owner and not layers.owner.unusable else {}
        problems: dict[str, list[str]] = {}
        changed = []
        for key, value in changes.items():
            spec = keys.get(key)
            if spec is None:
                problems.setdefault(GENERAL, []).append(f"{key}: not a setting this page changes")
                continue
            origin = layers.origin(spec.path)
            current = owner.get_path(now, spec.path)[1]
            value = _kept_secrets(spec, value, current)
            if value == current:
                continue
            if origin.startswith("from environment variable"):
                problems.setdefault(key, []).append(f"is set {origin}, which wins over this page")
                continue
            changed.append(key)
            if value == owner.get_path(below, spec.path)[1]:
                owner.drop_path(data, spec.path)
            else:
                owner.set_path(data, spec.path, value)
        proposal = Proposal(data, None, problems, changed=changed)
        if not problems:
            self._check(proposal)
        return proposal

    def _check(self, proposal: Proposal) -> None:
        resolved = self._resolve(owner_data=proposal.owner_data)
        found = list(resolved.problems.items) + resolved.owner_items
        known = {format_path(p) for p, _ in found}
        judged = resolved.with_owner or resolved.config  # the change itself, even beside a refused value
        try:  # the model and panel checks, in the check child (numpy and onnx stay out of the daemon)
            deep = config_checks.deep_problems(judged, self.state_dir())
        except FrameError as exc:
            proposal.problems.setdefault(GENERAL, []).append(f"the model settings could not be checked, so "
                                                             f"nothing was saved: {exc}")
            deep = []
        found += [(p, m) for p, m in deep if format_path(p) not in known]
        found += [(p, m) for p, m in _lora_problems(judged) if format_path(p) not in known]
        for path, message in found:
            key = field_for(path)
            message = redact_text(_item(path, key) + message)
            if key in proposal.changed or owner.get_path(proposal.owner_data, path)[0]:
                proposal.problems.setdefault(key, []).append(message)
            else:
                proposal.others.append(f"{format_path(path)}: {message}")
        proposal.config = resolved.config

    def save(self, proposal: Proposal) -> None:
        """Write the checked owner layer atomically, keeping the current one as the previous version."""
        if not proposal.ok:
            raise ValueError("refusing to save settings with problems")
        owner.save(self.state_dir(), proposal.owner_data, below=self._layers().source)  # the header names it

    def restore_changes(self) -> list[tuple[str, Any, Any]] | None:
        """What restoring the previous settings would change, for the page's confirmation: (field key,
        value now, value restored) for each field of the page that differs (secrets hidden); None when
        there is no previous version (or it cannot be read: restoring it would be refused)."""
        previous = owner.read_previous_layer(self.state_dir())
        if not previous.exists or previous.unusable:
            return None
        now = to_plain(self._resolve().config)
        then = to_plain(self._resolve(owner_data=previous.data).config)
        changes = []
        for spec in owner_fields.FIELDS:
            before, after = owner.get_path(now, spec.path)[1], owner.get_path(then, spec.path)[1]
            if before != after:
                changes.append((spec.key, _shown(spec, before), _shown(spec, after)))
        return changes

    def restore_previous(self) -> tuple[bool, Config | None, list[str]]:
        """Swap in ``settings.previous.yaml``; when the previous version no longer passes the checks
        (an upgrade changed a rule) swap back and say why. (restored, configuration, problems)."""
        folder = self.state_dir()
        if not owner.restore_previous(folder):
            return False, None, ["there is no previous version of the settings"]
        resolved = self._resolve()
        if resolved.owner_problems or resolved.problems.lines:
            owner.restore_previous(folder)
            return False, None, [redact_text(p) for p in resolved.owner_problems or resolved.problems.lines]
        return True, resolved.config, []


def _shown(spec: owner_fields.Field, value: Any) -> Any:
    if spec.kind == "secret":
        return ""
    if spec.url_secret and isinstance(value, str):
        return redact_url(value)
    if spec.kind == "feeds":
        return [dict(item, url=redact_url(item.get("url", ""))) for item in value or []]
    return value


def _kept_secrets(spec: owner_fields.Field, value: Any, current: Any) -> Any:
    """What the owner meant: an empty secret keeps the stored one; a URL sent back exactly as the page
    showed it (redacted) keeps the stored URL; the same for each feed's URL."""
    if spec.kind == "secret":
        return current if value in (None, "") else value
    if spec.url_secret and isinstance(value, str) and isinstance(current, str) and value == redact_url(current):
        return current
    if spec.kind == "feeds" and isinstance(value, list):
        stored = {redact_url(item.get("url", "")): item.get("url", "") for item in current or []}
        return [dict(item, url=stored.get(item.get("url"), item.get("url"))) if isinstance(item, dict) else item
                for item in value]
    return value


def changed_fields(old: Config, new: Config) -> dict[str, str]:
    """Field key → when it applies, for every page field whose value differs between two configurations."""
    before, after = dataclasses.asdict(old), dataclasses.asdict(new)
    return {spec.key: spec.applies for spec in owner_fields.FIELDS
            if owner.get_path(before, spec.path)[1] != owner.get_path(after, spec.path)[1]}


def _lora_problems(config: Config) -> list[tuple[tuple[str | int, ...], str]]:
    """A theme or style naming an unknown ``<lora:…>``, or a ``model.loras`` file that is not there: refused
    when saved, not found out at night (``frame.config.lora_tags``; no numpy)."""
    folders = lora_tags.configured_folders(config)
    found: list[tuple[tuple[str | int, ...], str]] = []
    for name in ("themes", "styles"):
        for i, text in enumerate(getattr(config.taste, name)):
            found += [(("taste", name, i), problem) for problem in lora_tags.check_prompts([text], folders)]
    for i, request in enumerate(lora_tags.configured_requests(config)):
        try:
            lora_tags.find(request, folders)
        except FrameError as exc:
            found.append((("model", "loras", i, "file"), str(exc)))
    return found
