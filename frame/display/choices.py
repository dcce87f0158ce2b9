"""The names owners can choose for fit, rotation and dithering (pure Python: the CLI and the config
checker import this without numpy)."""

FITS = ("cover", "contain", "blur-pad")
ROTATIONS = (0, 90, 180, 270)
DITHERS = ("auto", "linear-serpentine", "floyd-steinberg", "atkinson", "ordered", "blue-noise", "none")
