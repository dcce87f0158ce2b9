"""Suite-wide settings for the test process."""

from __future__ import annotations

import gc


def pytest_collection_finish(session) -> None:
    """Move everything collection created (test modules, items, the libraries they import: several
    hundred thousand objects) out of the garbage collector's sight.

    The engine calls ``gc.collect()`` after each model of a render (``frame.engine.memory.release_model``)
    so a worker on the Pi frees a phase's memory before the next one. In a worker that is a small
    process; in this test process every full collection walked all of collection's objects too, about
    0.4 s of CPU each, several times per in-process render. Those objects live until the session ends
    anyway; objects the tests create are still collected as before.
    """
    gc.collect()
    gc.freeze()
