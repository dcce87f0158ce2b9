"""``frame serve-render``: frame's pipeline behind the AUTOMATIC1111 API subset, for other frames.

A desktop in the household runs ``frame serve-render --token ...``; each frame sets ``render.backend:
remote`` and ``render.remote.url``/``token`` and hands it the night's job. ``engines`` picks the
execution provider (onnxruntime when ``frame[desktop]`` is installed, else frame's own engine),
``jobs`` runs one job at a time with the rest waiting in a queue, ``app`` is the Flask app (txt2img
and img2img), ``img2img`` checks img2img's own fields (the starting picture, its strength).
"""
