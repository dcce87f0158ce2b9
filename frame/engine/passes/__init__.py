"""The engine's load-time graph passes: fusions, reorderings and weight-decoding rewrites.

Each module matches a pattern in the bound node list and replaces it; ``order`` holds the one list of
passes in the order ``Model`` runs them (``PASSES``) and their counts (``Model.rewrites``).
"""

from frame.engine.passes.order import PASSES, Pass, PassContext, run_passes

__all__ = ["PASSES", "Pass", "PassContext", "run_passes"]
