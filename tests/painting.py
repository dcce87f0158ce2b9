"""``paint(pipe, prompt, **values)``: the tests' shorthand for ``pipe.generate(pipe.settings(...), ...)``.

The pipeline takes one resolved ``RenderSettings`` record (``Pipeline.settings`` checks it once);
many tests give the settings and the run's own arguments (callback, resume folder, init image or
noise) together, and this splits them the way every caller of the pipeline does.
"""

from __future__ import annotations

from typing import Any

RUN_ARGUMENTS = ("init_noise", "callback", "resume_dir", "tiled_decode", "init_image")


def paint(pipe: Any, prompt: str, *args: Any, **values: Any) -> Any:
    """``pipe.generate(pipe.settings(prompt, *args, **settings), **run arguments)``."""
    run = {name: values.pop(name) for name in RUN_ARGUMENTS if name in values}
    return pipe.generate(pipe.settings(prompt, *args, **values), **run)
