"""``frame config check`` and ``frame config show``."""

from __future__ import annotations

import argparse
import json
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    config = subparsers.add_parser("config", help="check or print the configuration")
    config_sub = config.add_subparsers(dest="config_command", metavar="ACTION")
    check = config_sub.add_parser(
        "check", help="validate a configuration file and report every problem at once",
        description="Validate FILE (default: the file frame would use) layered over the built-in defaults "
                    "and FRAME_* environment overrides. Exit 0 when valid, 2 with one line per problem.")
    check.add_argument("file", nargs="?", metavar="FILE", help="file to check")
    check.set_defaults(func=_config_check)
    show = config_sub.add_parser(
        "show", help="print the effective configuration (secrets hidden)",
        description="Print the configuration frame runs with: built-in defaults < FILE < the settings made on "
                    "the phone (STATE_DIR/settings.yaml) < FRAME_* environment overrides.")
    show.add_argument("file", nargs="?", metavar="FILE", help="file to layer over the defaults")
    show.add_argument("--origin", action="store_true",
                      help="print one key a line with where its value comes from (default, file line, "
                           "settings.yaml, environment variable)")
    show.set_defaults(func=_config_show)
    config.set_defaults(func=lambda args: config.print_help(sys.stderr) or 2)


def _config_check(args: argparse.Namespace) -> int:
    from frame.worker.checks import check_config

    path = args.file or args.config
    config = check_config(path)
    print(f"{path or 'configuration'}: ok")
    _describe_rule_warnings(config)
    _describe_onnxstream(config)
    _describe_model(config)
    lora_errors = _describe_loras(config)
    _describe_remote(config)
    readable = _describe_model_url(config)
    _describe_last_estimate(config)
    if readable:  # the estimate would only repeat why the model cannot be read
        _describe_estimate(config)
    return 1 if lora_errors else 0


def _describe_loras(config) -> int:
    """model.loras and the themes' <lora:…> tags: each file found, and what it changes in the model
    (keys that match nothing are warnings). Returns the number of errors (a LoRA that cannot be found
    or read would fail the night)."""
    from frame.config import lora_tags
    from frame.diffusion.loras import describe
    from frame.models import resolve_model_source

    requests = lora_tags.configured_requests(config)
    prompts = [*config.taste.themes, *config.taste.styles]
    if not requests and not any("<lora:" in p.lower() for p in prompts):
        return 0
    lines = describe(requests, lora_tags.configured_folders(config), resolve_model_source(config.model.source),
                     prompts)
    for level, line in lines:
        print(f"model.loras: {'' if level == 'info' else level + ': '}{line}")
    return sum(level == "error" for level, _ in lines)


def _describe_remote(config) -> None:
    """Reach the render server once (AUTOMATIC1111: GET /sdapi/v1/sd-models; ComfyUI: GET
    /object_info/CheckpointLoaderSimple; 5 s): unreachable is a warning, not an error, because the
    frame falls back to painting on the device."""
    remote = config.render.remote
    if not remote.url:
        return
    from frame.remote import RemoteUnavailable, check_comfyui, check_reachable

    comfy = config.render.backend == "comfyui"
    try:
        titles = (check_comfyui if comfy else check_reachable)(remote, seconds=5.0)
    except RemoteUnavailable as exc:
        fallback = " (nights fall back to painting on the frame)" if config.render.backend != "local" else ""
        print(f"render.remote.url: warning: {exc}{fallback}")
        return
    kind = "checkpoint" if comfy else "model"
    models = f": {', '.join(titles[:3])}{', ...' if len(titles) > 3 else ''}" if titles else ""
    print(f"render.remote.url: {remote.url and _redacted(remote.url)} answers{' (ComfyUI)' if comfy else ''}, "
          f"{len(titles)} {kind}{'s' if len(titles) != 1 else ''}{models}")
    if comfy and remote.checkpoint and remote.checkpoint not in titles:
        print(f"render.remote.checkpoint: warning: {remote.checkpoint!r} is not among the server's checkpoints "
              "(nights fall back to painting on the frame)")


def _redacted(url: str) -> str:
    from frame.redact import redact_url

    return redact_url(url)


def _describe_model_url(config) -> bool:
    """A URL model: is its server reachable, does it serve ranges; warnings, never a failure.
    False when a warning said the model cannot be streamed from there."""
    from frame.diffusion.configured import pipeline_setup
    from frame.diffusion.url_check import check_model_url

    setup = pipeline_setup(config)
    if not setup.source.startswith(("http://", "https://")):
        return True
    readable = True
    for level, line in check_model_url(setup.source, setup.http):
        print(f"model.source: {'warning: ' if level == 'warning' else ''}{line}")
        readable = readable and level != "warning"
    return readable


def _describe_rule_warnings(config) -> None:
    """Settings the night accepts but the model is not made for (Turbo with many steps or guidance)."""
    from frame.worker.model_rules import model_findings

    for finding in model_findings(config):
        if finding.warning:
            print(f"model.{finding.key}: warning: {finding.message}")


def _describe_onnxstream(config) -> None:
    """Say what an OnnxStream model folder holds: model kind, and each component's weight precision."""
    from frame.diffusion.onnxstream_layout import OnnxStreamFiles, is_onnxstream_folder
    from frame.models import resolve_model_source

    source = resolve_model_source(config.model.source)
    if "://" in source or not is_onnxstream_folder(source):
        return
    for line in OnnxStreamFiles(source).summary_lines():
        print(f"model.source: {line}")


def _describe_model(config) -> None:
    """The model folder's weight precision per component, and a VAE that cannot be tiled."""
    from pathlib import Path

    from frame.diffusion.model_check import describe_folder
    from frame.diffusion.onnxstream_layout import is_onnxstream_folder
    from frame.models import resolve_model_source

    source = resolve_model_source(config.model.source)
    if "://" in source or not Path(source).expanduser().is_dir() or is_onnxstream_folder(source):
        return
    for level, line in describe_folder(Path(source).expanduser(), config.model.vae_tile):
        print(f"model.source: {'warning: ' if level == 'warning' else ''}{line}")


def _describe_last_estimate(config) -> None:
    """The estimate saved in the state folder (the settings page's "Night estimate"): tonight's render
    writes it when it chooses its steps, ``frame estimate --state-dir`` when asked."""
    from frame.web.settings import last_estimate

    saved = last_estimate(config)
    if saved is None:
        print("estimate: no nightly estimate saved yet (the next scheduled night makes one)")
        return
    kind = "nightly" if saved["step_choice"] else "saved"
    print(f"estimate: last {kind} estimate ({saved['origin']}, made {saved['when']})"
          f"{': ' + saved['step_choice'] if saved['step_choice'] else ''}")
    for line in saved["lines"]:
        if line.startswith(("this machine:", "Raspberry Pi Zero 2 W:")):
            print(f"estimate:   then: {line}")


def _describe_estimate(config) -> None:
    """The night's estimate (``frame estimate`` has the details and a longer measurement)."""
    from frame.cli.estimate import config_check_lines

    for line in config_check_lines(config):
        print(f"estimate: {line}")


def _config_show(args: argparse.Namespace) -> int:
    """Print with ``dump_yaml``, the owner layer's writer: ``yaml.safe_dump`` left ``render_at: 02:00``
    bare, which a YAML 1.1 reader takes for the number 120, so a copy of what this prints into another
    tool or back into a config file would not read back the same."""
    from frame.config import load_config, to_plain
    from frame.config.yamltext import dump_yaml

    if args.origin:
        return _config_origins(args.file or args.config)
    config = load_config(args.file or args.config)
    dump_yaml(to_plain(config), sys.stdout)
    return 0


def origin_lines(path: str | None, environ: dict | None = None) -> list[str]:
    """``key: value  # origin`` for every key of the effective configuration (secrets hidden)."""
    from frame.config import to_plain
    from frame.config.loader import resolve
    from frame.config.validate import format_path
    from frame.errors import ConfigError

    resolved = resolve(path, environ)
    if resolved.problems.lines:
        raise ConfigError(resolved.problems.lines, resolved.source)
    layers = resolved.layers
    if resolved.owner_problems:
        layers.owner = None  # not used: every value comes from below it
    lines = [f"# not used: {problem}" for problem in resolved.owner_problems]
    for key_path, value in _leaves(to_plain(resolved.config)):
        shown = json.dumps(value, ensure_ascii=False)
        lines.append(f"{format_path(key_path)}: {shown}  # {layers.origin(key_path)}")
    return lines


def _leaves(plain, path: tuple = ()):
    """(key path, value) of every leaf; lists are one value (a layer replaces a list whole)."""
    if isinstance(plain, dict) and plain:
        for key, value in plain.items():
            yield from _leaves(value, (*path, key))
    else:
        yield path, plain


def _config_origins(path: str | None) -> int:
    from frame.redact import redact_text

    for line in origin_lines(path):
        print(redact_text(line))
    return 0
