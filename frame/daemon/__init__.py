"""frame.daemon: ``frame run`` — the nightly schedule, crash-proof render workers, the store, prompt
feeds, the JSON API and systemd integration (see docs/daemon.md).

Layout: ``service`` (the running daemon) uses ``schedule`` (when), ``night`` (one render: job →
``supervisor`` → ``worker``/``steps`` → ``gallery`` → show), ``store``/``migrations``/``recovery``
(SQLite), ``feeds``/``feedparse`` (remote prompts), ``app``/``server`` (API), ``token``, ``sdnotify``
and ``unit`` (systemd). ``commands`` holds the CLI. ``run_night`` is the synchronous night for
``frame demo``. Importing this package is cheap; heavy modules load only in worker processes.
"""


def __getattr__(name: str):
    if name == "run_night":
        from frame.daemon.night import run_night

        return run_night
    raise AttributeError(f"module 'frame.daemon' has no attribute {name!r}")
