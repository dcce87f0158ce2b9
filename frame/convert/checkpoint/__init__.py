"""frame.convert.checkpoint: the checkpoint side of ``frame model import``.

Single-file checkpoints (A1111/civitai ``.safetensors``), standalone VAE files and diffusers folders
with safetensors weights, on disk or at a URL, are read a tensor at a time (``reader``), recognised
from their keys and shapes (``detect``, ``plan``), and handed on per component as a diffusers config
and a stream of ``(diffusers key, float32 array)`` (``components``), the names mapped by ``unet_keys``,
``vae_keys`` and ``text_keys``. No torch: frame's own safetensors reader and numpy.
"""
