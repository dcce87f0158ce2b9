"""The bundled demo model: its source name, its folder (``frame/models/demo``) and its default step count."""

from pathlib import Path

DEMO_SOURCE = "demo"
# The demo model's default step count (``model.steps: null``): its random weights paint noise at any
# count, so 8 keeps ``frame demo``, ``frame render`` and a daemon night on it quick. Real models take
# the default of their kind (``ModelInfo.default_steps``). The model carries it in its own
# model_index.json (``DEFAULT_STEPS_KEY``), so a converted copy and the demo served over HTTP keep it
# (a check of the folder's path once lost it); tests/diffusion/test_model_info.py ties the two.
DEMO_DEFAULT_STEPS = 8
# A model's own default step count in its model_index.json; diffusers ignores keys starting with "_".
DEFAULT_STEPS_KEY = "_frame_default_steps"


def demo_model_path() -> Path:
    """Folder of the bundled demo model (diffusers ONNX layout, random weights: paints abstract noise)."""
    return Path(__file__).resolve().parent / "demo"


def is_demo_model(folder: str | Path) -> bool:
    """Whether ``folder`` is the bundled demo model (however it was named: ``demo`` or its path)."""
    if str(folder) == DEMO_SOURCE:
        return True
    try:
        return Path(folder).expanduser().resolve() == demo_model_path()
    except (OSError, RuntimeError):
        return False


def resolve_model_source(source: str) -> str:
    """Map the config's ``model.source`` to a folder path or URL: ``demo`` means the bundled model."""
    return str(demo_model_path()) if source == DEMO_SOURCE else source
