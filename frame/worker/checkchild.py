"""The settings checks that read model graphs, in a short child: ``python -m frame.worker.checkchild JOB_JSON``.

Why a child: ``frame.worker.checks`` brings ``frame.diffusion.pipeline`` (numpy, onnx,
Pillow) and opens the UNet's graph to apply the model rules; in the daemon that was +36.6 MiB for
good after the settings page's first view. Here it is gone when the check is done. The daemon asks
(``frame.daemon.jobs.children``) when the settings page is viewed and before a change is saved, and
keeps the answer for the same settings text.

``CheckJob.what`` "file": ``check_config`` on the file, exactly as ``frame config check`` (problem lines);
"config": ``deep_problems`` on exactly the settings in the file (no environment, no owner layer: the
daemon wrote the settings it is about to save), as (key path, message); "prompt": ``queued_problems``
of a queued prompt's own settings under those settings, and the model's size rule for the queue form;
"loras": a queued prompt's LoRA files read and matched against the model (``lora_checks``).
"""

from __future__ import annotations

import sys

from frame.config.loader import resolve
from frame.errors import ConfigError
from frame.worker.checks import check_config, deep_problems, model_night_size, model_size_rule, queued_problems
from frame.worker.childmain import Refused, child_main
from frame.worker.lora_checks import lora_findings
from frame.worker.shortjobs import CheckJob, CheckOutput, ChildJob


def run(job: ChildJob) -> CheckOutput:
    if not isinstance(job, CheckJob):
        raise Refused(f"the check child does not do {job.kind} jobs")
    if job.what == "file":
        try:
            check_config(job.config)
        except ConfigError as exc:
            return CheckOutput(lines=tuple(exc.problems))
        return CheckOutput()
    config = resolve(job.config, environ={}, with_owner=False).config
    if job.what == "loras":
        texts = (job.prompt or {}).get("texts") or []
        problems, warnings = lora_findings(config, [text for text in texts if isinstance(text, str)])
        return CheckOutput(lines=tuple(warnings), problems=tuple((("prompt",), message) for message in problems))
    if job.what == "prompt":
        found = queued_problems(config, job.prompt or {})
        return CheckOutput(problems=tuple(((name,), message) for name, message in found or ()),
                           size_rule=model_size_rule(config), night_size=model_night_size(config),
                           model_known=found is not None)
    return CheckOutput(problems=tuple((tuple(path), message) for path, message in deep_problems(config)))


def main(argv: list[str] | None = None) -> int:
    return child_main(sys.argv[1:] if argv is None else argv, run, cap_address=False)


if __name__ == "__main__":
    raise SystemExit(main())
