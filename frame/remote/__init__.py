"""frame.remote: paint the night's picture on a LAN render server (``frame.serve.render`` is one).

Two clients with one contract: ``render_remote`` speaks the AUTOMATIC1111 web API subset that
AUTOMATIC1111, Forge and SD.Next serve (and ``frame serve-render``; ``render.backend: remote``),
``render_comfyui`` ComfyUI's (``render.backend: comfyui``: a workflow posted, its history polled, the
picture fetched). Any failure ends in ``RemoteUnavailable``, the signal to paint on the device
instead. The render worker's whole use of it::

    from frame.remote import RemoteUnavailable, night_job, render_remote

    job = night_job(config, choice["prompt"], choice["negative_prompt"], seed)
    try:
        result = render_remote(config.render.remote, job, progress=relay, deadline_seconds=left)
    except RemoteUnavailable as exc:   # exc.reason: "refused", "timeout", ...; str(exc) for the owner
        ...paint locally...
    result.image            # PIL RGB image, image.info["parameters"] = A1111 parameters text
    result.parameters       # frame.diffusion.pngmeta.GenerationParameters

Modules: ``a1111`` (request/answer JSON), ``comfyui`` (workflows and ComfyUI's answers),
``comfy_render`` (one ComfyUI job), ``comfy_ws`` (its step progress over ComfyUI's websocket),
``client`` (HTTP, deadlines, failure reasons), ``picture``
(checking the returned image), ``render`` (one job with progress), ``night`` (the job from the config),
``nightstep`` (the render worker's generate step: ask the server, else record why and paint on the
frame; resumable), ``serve`` (the server side). Importing this package is cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from frame.lazy import lazy_exports

if TYPE_CHECKING:
    from frame.remote.a1111 import RemoteJob
    from frame.remote.comfy_render import check_comfyui, render_comfyui
    from frame.remote.errors import RemoteUnavailable
    from frame.remote.night import night_job
    from frame.remote.render import RemoteResult, check_reachable, render_remote

__all__ = ["RemoteJob", "RemoteResult", "RemoteUnavailable", "check_comfyui", "check_reachable", "night_job",
           "render_comfyui", "render_remote"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "RemoteJob": "frame.remote.a1111",
    "RemoteResult": "frame.remote.render",
    "RemoteUnavailable": "frame.remote.errors",
    "check_comfyui": "frame.remote.comfy_render",
    "check_reachable": "frame.remote.render",
    "night_job": "frame.remote.night",
    "render_comfyui": "frame.remote.comfy_render",
    "render_remote": "frame.remote.render",
})
