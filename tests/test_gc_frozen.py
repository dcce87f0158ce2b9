"""``tests/conftest.py`` freezes collection's objects in every process that runs tests.

Under pytest-xdist (README's command: ``-n 2``) the controller process collects nothing; each worker
collects the suite itself and runs ``pytest_collection_finish`` there, so each worker's in-process
renders skip collection's objects in their ``gc.collect()`` calls, as the single process did.
"""

from __future__ import annotations

import gc
import os


def test_collections_objects_are_frozen_in_the_process_running_this_test():
    frozen = gc.get_freeze_count()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "no xdist worker")
    assert frozen > 10_000, f"{worker}: only {frozen} objects frozen: tests/conftest.py's gc.freeze() did not run here"
