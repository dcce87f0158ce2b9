"""frame: a set-and-forget generative e-paper wall frame.

Importing this package is cheap on purpose: the daemon stays small and the CLI starts fast, so
subpackages (engine, diffusion, display, taste, daemon) are imported only by the code that needs them.
"""

__version__ = "0.1.0"
