"""Package-level promises: cheap import, public names, runnable docstring example."""

import doctest
import subprocess
import sys

import frame.taste


def test_import_is_cheap():
    code = "import sys, frame.taste; print('sklearn' in sys.modules, 'matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=".")
    assert out.stdout.split() == ["False", "False"]


def test_public_names_resolve():
    for name in frame.taste.__all__:
        assert getattr(frame.taste, name) is not None


def test_classifier_docstring_example_runs():
    import frame.taste.classifier as module

    result = doctest.testmod(module)
    assert result.attempted >= 3 and result.failed == 0
