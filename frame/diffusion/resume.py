"""Resume after power loss: a checkpoint of the denoising loop written atomically after every step.

A frame on a wall loses power; an hour-long render should not start over. After each step the
pipeline writes one file holding the latents, the next step index, the sampler history (e.g.
DPM-Solver's previous x0), the random generator state and a hash of every parameter that shapes the
result (model identity, prompts, seed, size, sampler, steps, guidance, initial noise). It is written
to a temporary file, fsynced, renamed over the old one and the folder is fsynced, so a crash at any
moment leaves either the previous or the new checkpoint, never a torn one.

File layout: ``FRAMESTATE1\\n`` + sha256 of the payload (hex) + ``\\n`` + payload, the payload being an
``.npz`` with the arrays and a JSON ``meta`` entry. A bad checksum, an unreadable file or a different
parameter hash means a fresh start (with a warning for damage).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from frame import seeds
from frame.atomicfile import fsync_dir, make_dirs, stale_temporaries, write_bytes_atomic

if TYPE_CHECKING:
    from frame.diffusion.samplers.base import NoiseState

log = logging.getLogger(__name__)

MAGIC = b"FRAMESTATE1\n"
FILENAME = "render-state.bin"
SEED_FILENAME = "seed.json"  # the random seed an interrupted render was started with
# the latents and the sampler's history: SDXL at 1024x1024 keeps a few 256 kB arrays; a bigger file is
# refused before it is read, and no member may unpack to more than the file holds (no compression)
MAX_BYTES = 64 << 20


def parameters_hash(parameters: dict[str, Any]) -> str:
    """Stable hash of JSON-able parameters (arrays should be passed as their own hashes)."""
    text = json.dumps(parameters, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def array_hash(array: np.ndarray) -> str:
    array = np.ascontiguousarray(array)
    return hashlib.sha256(f"{array.dtype.str}{array.shape}".encode() + array.tobytes()).hexdigest()


def render_hash(model_identity: str, settings: dict[str, Any], init_noise: np.ndarray, lora_tags: list[str],
                init_parts: dict[str, str | None] | None) -> str:
    """The hash a render's checkpoint is kept under: the model, the resolved settings (a
    ``RenderSettings``'s fields), the initial noise, the LoRAs and an init image's parts. Values that
    came later are left out at their defaults, so a checkpoint written before they existed still fits."""
    values = {k: v for k, v in settings.items()
              if not (k == "strength" and v is None) and not (k == "noise" and v == "frame")}
    parameters = {"format": 1, "model": model_identity, "settings": values, "init_noise": array_hash(init_noise)}
    if lora_tags:  # as are those without model.loras
        parameters["loras"] = list(lora_tags)
    if init_parts is not None:  # text-to-image hashes stay as they were before image-to-image existed
        parameters.update(init_parts)
    return parameters_hash(parameters)


@dataclass
class Checkpoint:
    """State after ``step`` finished steps: resume by running step index ``step`` next."""

    step: int
    latents: np.ndarray
    history: dict[str, np.ndarray] = field(default_factory=dict)
    rng_state: NoiseState | None = None


class ResumeStore:
    """The checkpoint file in ``folder`` for one set of parameters (``params_hash``)."""

    def __init__(self, folder: str | os.PathLike, params_hash: str) -> None:
        self.folder = Path(folder)
        self.path = self.folder / FILENAME
        self.params_hash = params_hash

    def load(self) -> Checkpoint | None:
        """The saved checkpoint if it is intact and belongs to these parameters, else None."""
        try:
            with open(self.path, "rb") as file:
                blob = file.read(MAX_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot read render state %s (%s); starting fresh", self.path, exc)
            return None
        try:
            if len(blob) > MAX_BYTES:
                raise ValueError(f"more than a render state's {MAX_BYTES} bytes")
            meta, arrays = _decode(blob)
        except ValueError as exc:
            log.warning("render state %s is damaged (%s); starting fresh", self.path, exc)
            return None
        if meta.get("params") != self.params_hash:
            log.info("render state in %s is for different parameters; starting fresh", self.folder)
            return None
        history = {k[len("history/"):]: v for k, v in arrays.items() if k.startswith("history/")}
        log.info("resuming from step %d (%s)", meta["step"], self.path)
        return Checkpoint(int(meta["step"]), arrays["latents"], history, meta.get("rng"))

    def save(self, checkpoint: Checkpoint) -> None:
        """Atomically replace the checkpoint file."""
        meta = {"params": self.params_hash, "step": checkpoint.step, "rng": checkpoint.rng_state}
        arrays = {"latents": checkpoint.latents, **{f"history/{k}": v for k, v in checkpoint.history.items()}}
        blob = _encode(meta, arrays)
        make_dirs(self.folder)  # a new folder's parent is fsynced: the checkpoint cannot vanish with it
        write_bytes_atomic(self.path, blob, mode=0o666)  # 0o666 less the umask, as open() gives

    def clear(self) -> None:
        """Forget the checkpoint and the remembered seed (after the picture is finished)."""
        seed_file = self.folder / SEED_FILENAME
        for path in (self.path, *stale_temporaries(self.path), seed_file, *stale_temporaries(seed_file)):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        if self.folder.exists():
            fsync_dir(self.folder)


def resumable_seed(folder: str | os.PathLike, seed: int | None) -> int:
    """The seed for a render checkpointed in ``folder``: ``seed`` itself, or for a random one (None or
    -1) the random seed this folder's interrupted render started with, else a new one, remembered in
    ``folder`` so that ``--resume`` continues the same picture instead of starting another."""

    if not seeds.is_random(seed):
        return seed  # type: ignore[return-value]  (checked by Pipeline.settings)
    path = Path(folder) / SEED_FILENAME
    try:
        remembered = json.loads(path.read_text(encoding="utf-8"))["seed"]
        if isinstance(remembered, int) and 0 <= remembered < seeds.SEED_LIMIT:
            return remembered
    except (OSError, ValueError, KeyError, TypeError):
        pass  # none yet, or damaged: a new render
    chosen = seeds.resolve_seed(seed)
    make_dirs(path.parent)
    write_bytes_atomic(path, json.dumps({"seed": chosen}).encode("utf-8"), mode=0o666)
    return chosen


def _encode(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    meta_bytes = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    np.savez(buffer, meta=meta_bytes, **arrays)
    payload = buffer.getvalue()
    return MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def _decode(blob: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    if not blob.startswith(MAGIC):
        raise ValueError("not a frame render state file")
    header_end = blob.find(b"\n", len(MAGIC))
    if header_end < 0:
        raise ValueError("header is truncated")
    digest, payload = blob[len(MAGIC):header_end].decode("ascii", "replace"), blob[header_end + 1:]
    if hashlib.sha256(payload).hexdigest() != digest:
        raise ValueError("checksum mismatch")
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            for info in archive.infolist():  # np.savez stores: anything compressed was not written by frame
                if info.compress_type != zipfile.ZIP_STORED or info.file_size > len(payload):
                    raise ValueError(f"member {info.filename[:40]!r} is compressed or bigger than the file")
        with np.load(io.BytesIO(payload), allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
    except Exception as exc:  # zipfile/json errors inside a checksummed payload: written by a bug or forged
        raise ValueError(f"unreadable payload ({str(exc)[:120]})") from None
    if not isinstance(meta, dict) or "latents" not in arrays or type(meta.get("step")) is not int or meta["step"] < 0:
        raise ValueError("latents or step missing")
    if any(a.dtype.kind not in "fiub" for a in arrays.values()):
        raise ValueError("an array that is not numbers")
    if meta.get("rng") is not None and not isinstance(meta["rng"], dict):
        raise ValueError("the random generator's state is not a table")
    return meta, arrays
