"""Models shipped inside the package: the tiny random-weight demo model (``frame/models/demo``)."""

from pathlib import Path

DEMO_SOURCE = "demo"


def demo_model_path() -> Path:
    """Folder of the bundled demo model (diffusers ONNX layout, random weights: paints abstract noise)."""
    return Path(__file__).resolve().parent / "demo"


def resolve_model_source(source: str) -> str:
    """Map the config's ``model.source`` to a folder path or URL: ``demo`` means the bundled model."""
    return str(demo_model_path()) if source == DEMO_SOURCE else source
