"""Runs ComfyUI's own ``main.py`` with the registry's torchvision beside torch 2.13.0+cpu (a script:
``python comfyui_launch.py COMFYUI_DIR [main.py's arguments]``, started by ``real_comfyui.py``).

Why this exists: ComfyUI 0.3.75 imports torchvision when it starts (``comfy/model_base.py`` imports
``comfy/ldm/cosmos/model.py``, which does ``from torchvision import transforms``), although SD 1.5 never
calls it. The only torchvision the package registry has for torch 2.13.0 (0.28.0, Linux x86_64) is
built against CUDA torch: its ``_C.so`` needs ``libc10_cuda.so`` and ``libtorch_cuda.so``, which the CPU
build of torch does not ship, so its C++ operators (nms, roi_align, deform_conv2d, ...) do not load.
torchvision copes with that (``torchvision.extension._has_ops()`` is False and each of those
operators raises "Couldn't load custom C++ ops" when called), except in one place: its
``_meta_registrations.py`` registers fake kernels for ``torchvision::nms`` and ``torchvision::qnms``
without checking, so ``import torchvision`` fails with "operator torchvision::nms does not exist".

Declaring the schemas of those two operators (their real signatures, no kernel: calling one still
raises) lets the real torchvision import; nothing else is changed, and the launcher checks that the
C++ operators are indeed absent rather than quietly standing in for them. torchvision is installed
beside ComfyUI (``pip install --target``), never into frame's venv.
"""

from __future__ import annotations

import runpy
import sys

import torch


def declare_torchvision_schemas() -> torch.library.Library:
    library = torch.library.Library("torchvision", "DEF")
    for name in ("nms", "qnms"):
        library.define(f"{name}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    return library


def main() -> None:
    comfy_dir, arguments = sys.argv[1], sys.argv[2:]
    library = declare_torchvision_schemas()  # noqa: F841  (kept alive while ComfyUI runs)
    import torchvision.extension

    if torchvision.extension._has_ops():  # then the declarations above were wrong to make: say so
        raise SystemExit("torchvision's C++ operators loaded: comfyui_launch.py's declarations are not needed")
    sys.argv = [f"{comfy_dir}/main.py", *arguments]
    sys.path.insert(0, comfy_dir)
    runpy.run_path(f"{comfy_dir}/main.py", run_name="__main__")


if __name__ == "__main__":
    main()
