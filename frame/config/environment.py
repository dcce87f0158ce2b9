"""The ``FRAME_*`` environment variables that are not settings.

Every other ``FRAME_*`` variable overrides a setting (``loader.env_overrides``): ``FRAME_MODEL__STEPS=8``
sets ``model.steps``, and an unknown one is an error naming the variable, so a typo never passes
silently. The variables below carry something else, and the configuration loader skips them by this
list (``NOT_SETTINGS``). A new variable that is not a setting must be added here:
``tests/config/test_environment.py`` finds every ``FRAME_*`` name in frame's source and fails on one
that is neither a setting nor listed. Once, the daemon's ``FRAME_PARENT_PID`` for its workers was read
as a setting, and every night's step estimate failed with "parent_pid: unknown key".
"""

from __future__ import annotations

CONFIG_FILE = "FRAME_CONFIG"                  # the configuration file when --config is not given
PARENT_PID = "FRAME_PARENT_PID"               # set by the daemon for its workers: die with the daemon
WORKER_LOG = "FRAME_WORKER_LOG"               # the workers' log level (default INFO)
WORKER_LOG_FILE = "FRAME_WORKER_LOG_FILE"     # set by frame demo: the workers log there (stderr: warnings)
SERVE_MODEL_TOKEN = "FRAME_SERVE_MODEL_TOKEN"  # frame serve-model's token when no --token/--token-file
SERVE_RENDER_TOKEN = "FRAME_SERVE_RENDER_TOKEN"  # frame serve-render's token when no --token/--token-file
SYSTEM_MALLOC = "FRAME_SYSTEM_MALLOC"         # set by frame run for itself when it re-executes with PYTHONMALLOC=malloc

NOT_SETTINGS = frozenset({CONFIG_FILE, PARENT_PID, WORKER_LOG, WORKER_LOG_FILE, SERVE_MODEL_TOKEN,
                          SERVE_RENDER_TOKEN, SYSTEM_MALLOC})
