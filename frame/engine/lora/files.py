"""A LoRA file's modules, per component, from kohya/A1111 or diffusers/PEFT safetensors keys.

kohya / A1111 (sd-scripts, the files on civitai): ``lora_unet_<module with _>.lora_down.weight``,
``.lora_up.weight`` and ``.alpha``; ``lora_te_`` / ``lora_te1_`` for the (first) text encoder and
``lora_te2_`` for SDXL's second. LoCon files add conv layers the same way (down ``[r, in, kh, kw]``,
up ``[out, r, 1, 1]``). diffusers / PEFT: ``unet.<module>.lora_A.weight`` / ``.lora_B.weight``
(``text_encoder.``, ``text_encoder_2.``; older diffusers ``.lora.down.weight`` / ``.lora.up.weight``),
alpha from the ``.alpha`` key, else from diffusers' ``lora_adapter_metadata`` (flat or nested), else the rank
(PEFT's default scaling of 1). Module names are kept with ``_`` for ``.`` so both spellings meet
the graph's node names the same way (``matching``). Keys of other kinds (LoHa ``hada_``, LoKr,
DoRA's ``dora_scale``, Tucker ``lora_mid``) are listed as unsupported, never silently dropped.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

from frame.engine.io.safetensors import TensorEntry, read_header
from frame.errors import UsageError

COMPONENTS = ("unet", "text_encoder", "text_encoder_2")
_KOHYA_PREFIXES = (("lora_unet_", "unet"), ("lora_te1_", "text_encoder"), ("lora_te2_", "text_encoder_2"),
                   ("lora_te_", "text_encoder"))
_PEFT_PREFIXES = (("unet.", "unet"), ("text_encoder_2.", "text_encoder_2"), ("text_encoder.", "text_encoder"),
                  ("base_model.model.", "unet"))
_SUFFIXES = ((".lora_down.weight", "down"), (".lora_up.weight", "up"), (".lora_A.weight", "down"),
             (".lora_B.weight", "up"), (".lora.down.weight", "down"), (".lora.up.weight", "up"),
             (".lora_linear_layer.down.weight", "down"), (".lora_linear_layer.up.weight", "up"),
             (".alpha", "alpha"))


@dataclass
class LoraModule:
    """One changed layer: ``up @ down`` (reshaped to the layer's weight) times ``alpha / rank``."""

    name: str  # the module path with "_" for "." (kohya's spelling), without the component prefix
    down: TensorEntry | None = None
    up: TensorEntry | None = None
    alpha: float | None = None
    rslora: bool = False  # peft's use_rslora (from diffusers' metadata): alpha / sqrt(rank)

    @property
    def rank(self) -> int:
        return self.down.shape[0] if self.down is not None else 0

    @property
    def factor(self) -> float:
        """alpha / rank: kohya's and peft's scaling (alpha = rank, i.e. 1, when the file has none);
        alpha / sqrt(rank) for an rsLoRA adapter."""
        alpha = self.alpha if self.alpha is not None else self.rank
        return alpha / (math.sqrt(max(self.rank, 1)) if self.rslora else max(self.rank, 1))

    @property
    def nbytes(self) -> int:
        return (self.down.nbytes if self.down else 0) + (self.up.nbytes if self.up else 0)


@dataclass
class LoraFile:
    path: str
    components: dict[str, dict[str, LoraModule]] = field(default_factory=dict)
    unsupported: list[str] = field(default_factory=list)  # keys of a kind frame does not apply

    @property
    def name(self) -> str:
        return os.path.splitext(os.path.basename(self.path))[0]

    def modules(self, component: str) -> dict[str, LoraModule]:
        return self.components.get(component, {})


def _split(key: str) -> tuple[str, str, str] | None:
    """(component, module with "_", part) of a key, or None when it is not a LoRA factor key."""
    for suffix, kind in _SUFFIXES:
        if key.endswith(suffix):
            stem, part = key[:-len(suffix)], kind
            break
    else:
        return None
    for prefix, component in _KOHYA_PREFIXES:
        if stem.startswith(prefix):
            return component, stem[len(prefix):], part
    for prefix, component in _PEFT_PREFIXES:
        if stem.startswith(prefix):
            return component, stem[len(prefix):].replace(".", "_"), part
    if "." in stem or stem.startswith(("down_blocks", "up_blocks", "mid_block")):  # bare diffusers UNet keys
        return "unet", stem.replace(".", "_"), part
    return None


def _adapter_configs(metadata: dict[str, str]) -> dict[str, dict]:
    """diffusers' ``lora_adapter_metadata``: the peft config of each component, from either form it
    takes. diffusers 0.42's ``save_lora_weights`` writes flat keys (``{"unet.lora_alpha": 8, "unet.r":
    4, "text_encoder.lora_alpha": ...}``); older writers nested one object per component (``{"unet":
    {"lora_alpha": 8, ...}}``). Anything else is no config: alpha then comes from the keys or the rank."""
    try:
        adapters = json.loads(metadata.get("lora_adapter_metadata", "{}"))
    except (json.JSONDecodeError, RecursionError):
        return {}
    configs: dict[str, dict] = {}
    for key, value in adapters.items() if isinstance(adapters, dict) else ():
        if key in COMPONENTS and isinstance(value, dict):
            configs.setdefault(key, {}).update(value)
        elif "." in key and key.split(".", 1)[0] in COMPONENTS:
            component, field_name = key.split(".", 1)
            configs.setdefault(component, {})[field_name] = value
    return configs


def _metadata_scaling(path: str, metadata: dict[str, str]) -> dict[str, tuple[float, bool]]:
    """(alpha, rsLoRA) per component from diffusers' adapter metadata; UsageError naming the file for an
    alpha that is not a finite number (a NaN alpha paints an all-black picture)."""
    found = {}
    for component, config in _adapter_configs(metadata).items():
        alpha = config.get("lora_alpha")
        if alpha is None:
            continue
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
            raise UsageError(f"{path}: {component}.lora_alpha in the file's lora_adapter_metadata is "
                             f"{str(alpha)[:40]!r}, not a finite number")
        found[component] = (float(alpha), config.get("use_rslora") is True)
    return found


MAX_FACTOR_ELEMENTS = 1 << 24  # one factor's values (64 MB as float32; an SDXL rank-256 factor has 1.3 M)


def _check_entry(path: str, label: str, entry: TensorEntry, ranks: tuple[int, ...]) -> None:
    """One factor's header facts that the render relies on: whole-number byte offsets, 2 or 4 axes
    (``ranks``), no empty axis, and a size a Pi's worker can hold."""
    if not (type(entry.start) is int and type(entry.stop) is int):  # noqa: E721 - a float offset passes ==
        raise UsageError(f"{path}: {label} has byte offsets that are not whole numbers")
    if len(entry.shape) not in ranks:
        raise UsageError(f"{path}: {label} has shape {list(entry.shape)}, not a LoRA factor "
                         f"({' or '.join(map(str, ranks))} axes)")
    if min(entry.shape) < 1:
        raise UsageError(f"{path}: {label} has shape {list(entry.shape)} (rank 0 or an empty axis): it changes nothing")
    if math.prod(entry.shape) > MAX_FACTOR_ELEMENTS:
        raise UsageError(f"{path}: {label} has {math.prod(entry.shape):,} values, more than the "
                         f"{MAX_FACTOR_ELEMENTS:,} a LoRA factor may have here")


def _check_module(path: str, component: str, module: LoraModule) -> None:
    label = f"LoRA module {component}.{module.name}"
    if module.down is None or module.up is None:
        raise UsageError(f"{path}: {label} has no "
                         f"{'down (lora_A)' if module.down is None else 'up (lora_B)'} weight")
    _check_entry(path, f"{label}'s down weight", module.down, (2, 4))
    _check_entry(path, f"{label}'s up weight", module.up, (2, 4))
    if module.up.shape[1] != module.rank or (len(module.up.shape) == 4 and module.up.shape[2:] != (1, 1)):
        raise UsageError(f"{path}: {label}: up {list(module.up.shape)} does not fit down {list(module.down.shape)}")


def _alpha(path: str, key: str, entry: TensorEntry) -> float:
    """A module's ``.alpha`` tensor: exactly one finite number."""
    if not (type(entry.start) is int and type(entry.stop) is int) or math.prod(entry.shape) != 1:  # noqa: E721
        raise UsageError(f"{path}: {key} must hold one number, it has shape {list(entry.shape)}")
    value = float(entry.read().reshape(-1)[0])
    if not math.isfinite(value):
        raise UsageError(f"{path}: {key} is {value}, not a finite number (it would paint a black picture)")
    return value


def read_lora(path: str | os.PathLike) -> LoraFile:
    """The modules of a LoRA safetensors file (header only; factors are read when a weight streams,
    ``values.check_values`` reads them all once). UsageError naming the file when it holds no LoRA
    factors, a module lacks its up or down half, or a factor or alpha is malformed; a header the reader
    trips over in an unforeseen way is the same one line, never a traceback."""
    try:
        return _read_lora(os.fspath(path))
    except UsageError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError, RecursionError) as exc:
        raise UsageError(f"{os.fspath(path)}: not a LoRA file frame can read (a malformed header: "
                         f"{type(exc).__name__})") from exc


def _read_lora(path: str) -> LoraFile:
    header = read_header(path)
    lora = LoraFile(header.path)
    for key, entry in header.tensors.items():
        parsed = _split(key)
        if parsed is None:
            lora.unsupported.append(key)
            continue
        component, name, part = parsed
        module = lora.components.setdefault(component, {}).setdefault(name, LoraModule(name))
        if part == "alpha":
            module.alpha = _alpha(lora.path, key, entry)
        else:
            setattr(module, part, entry)
    scaling = _metadata_scaling(lora.path, header.metadata if isinstance(header.metadata, dict) else {})
    for component, modules in lora.components.items():
        for module in modules.values():
            _check_module(lora.path, component, module)
            if module.alpha is None and component in scaling:
                module.alpha, module.rslora = scaling[component]
    if not lora.components:
        raise UsageError(f"{lora.path}: holds no LoRA weights frame can read (kohya lora_down/lora_up or "
                         f"PEFT lora_A/lora_B); first keys: {', '.join(list(header.tensors)[:3]) or 'none'}")
    return lora
