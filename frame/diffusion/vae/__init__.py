"""The VAE: latents to pixels and back, in tiles that fit the worker's memory.

* ``tiles.py`` — which tiles: the layout rule the render and the estimate share (no numpy, so the
  settings checks can read it);
* ``decoder.py`` — latents → pixels, whole or in tiles blended with linear ramps;
* ``encoder.py`` — pixels → the scaled latent an image-to-image render starts from;
* ``shapes.py`` — whether a decoder exported with a fixed input size can still be decoded in tiles;
* ``tiny.py`` — ``model.vae_decoder``: the owner's tiny VAE (TAESD / TAESDXL) in place of the model's.
"""
