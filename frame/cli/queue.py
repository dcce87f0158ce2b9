"""``frame queue``: add a prompt with its own settings, or list, edit, move and remove queued ones,
through the running daemon's JSON API (``/api/prompts``). The daemon checks every value
(``frame.daemon.queue``); this module only turns the command line into requests and answers into lines.

    frame queue "a lighthouse at dusk" --steps 20 --seed 42 --size 768x512
    frame queue --list
    frame queue --move 7 1          # prompt 7 is painted next
    frame queue --edit 7 --steps "" --seed -1   # back to the night's steps, a random seed
    frame queue --remove 7
"""

from __future__ import annotations

import argparse
from typing import Any

from frame.errors import UsageError

SETTINGS = (("steps", "denoising steps (default: model.steps, or what fits the night)"),
            ("sampler", "sampler name, e.g. euler_a, ddim, dpm++2m_karras (default: model.sampler)"),
            ("guidance", "classifier-free guidance scale (default: model.guidance)"),
            ("seed", "seed; -1 = random (the default)"),
            ("size", "WIDTHxHEIGHT in the model's multiples: 16 px for the demo, 64 for SD 1.5 and SDXL "
                     "(default: model.size)"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", nargs="?", help="the prompt text (to add one)")
    actions = parser.add_mutually_exclusive_group()
    actions.add_argument("--list", action="store_true", help="list the queued prompts, next night's first")
    actions.add_argument("--remove", type=int, metavar="ID", help="take prompt ID out of the queue")
    actions.add_argument("--move", type=int, nargs=2, metavar=("ID", "POS"),
                         help="put prompt ID at position POS (1 = painted next)")
    actions.add_argument("--edit", type=int, metavar="ID",
                         help="change prompt ID: the prompt text and the options given ('' = the default)")
    parser.add_argument("--negative", help="negative prompt (default: model.negative_prompt)")
    parser.add_argument("--theme", help="theme name to file it under")
    for name, text in SETTINGS:
        parser.add_argument(f"--{name}", help=text)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    body = {name: getattr(args, name) for name, _ in SETTINGS if getattr(args, name) is not None}
    if args.negative is not None:
        body["negative_prompt"] = args.negative
    if args.theme is not None:
        body["theme"] = args.theme
    return body


def run(args: argparse.Namespace, client: Any) -> list[str]:
    """Do what the command line asks; the lines to print."""
    if args.list:
        return describe(client.request("GET", "/api/prompts")["prompts"])
    if args.remove is not None:
        client.request("DELETE", f"/api/prompts/{args.remove}")
        return [f"removed prompt {args.remove} from the queue"]
    if args.move is not None:
        prompt_id, position = args.move
        return [f"moved prompt {prompt_id} to position {position}",
                *describe(client.request("POST", f"/api/prompts/{prompt_id}/move", {"position": position})["prompts"])]
    body = _settings(args)
    if args.prompt is not None:
        if not args.prompt.strip():
            raise UsageError("queue: the prompt is empty; say what to paint, e.g. frame queue 'a lighthouse at dusk'")
        body["prompt"] = args.prompt
    if args.edit is not None:
        if not body:
            raise UsageError("queue --edit: say what to change (a new prompt text or options such as --steps)")
        edited = client.request("PATCH", f"/api/prompts/{args.edit}", body)
        order = [prompt["id"] for prompt in client.request("GET", "/api/prompts")["prompts"]]
        return ["edited: " + line(order.index(edited["id"]) + 1 if edited["id"] in order else None, edited)]
    if args.prompt is None:
        raise UsageError("queue: give a prompt to add, or --list, --remove ID, --move ID POS or --edit ID")
    result = client.request("POST", "/api/prompts", {"negative_prompt": "", "theme": "", **body})
    return [f"queued prompt {result['id']}: {result['prompt']}"]


def describe(prompts: list[dict[str, Any]]) -> list[str]:
    """One line per queued prompt: position, id, the prompt and what it sets itself."""
    if not prompts:
        return ["nothing queued: the next nights paint from your themes and feeds"]
    return [line(number, prompt) for number, prompt in enumerate(prompts, start=1)]


def line(position: int | None, prompt: dict[str, Any]) -> str:
    """One queued prompt: its position in the queue (None: not known), id, text and own settings. An
    edited prompt is asked its position in the queue: its line once always began "1."."""
    own = [f"{key} {prompt[key]}" for key in ("steps", "sampler", "guidance", "seed")
           if prompt.get(key) is not None]
    if prompt.get("width") and prompt.get("height"):
        own.append(f"size {prompt['width']}x{prompt['height']}")
    if prompt.get("source_picture_id") is not None:
        own.insert(0, f"more like picture {prompt['source_picture_id']} (strength {prompt['strength']:g})")
    extra = f"  [{', '.join(own)}]" if own else ""
    return f"{f'{position}. ' if position is not None else ''}#{prompt['id']} {prompt['prompt']}{extra}"
