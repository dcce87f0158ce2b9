"""frame.daemon: ``frame run`` — the nightly schedule, crash-proof render workers, the store, prompt
feeds, the JSON API and systemd integration (see docs/daemon.md).

Layout: ``service`` (the running daemon) uses ``schedule`` (when), ``jobs`` (one render or show: the
job folder → ``jobs.supervisor`` → the worker processes of ``frame.worker`` → ``store.gallery`` →
show; ``jobs.info`` the info screen), ``store`` (SQLite: ``database``, ``migrations``, ``recovery``,
``gallery``), ``feeds`` (remote prompts: ``fetch``, ``parse``), ``actions`` (the owner's actions, which
the JSON API and the phone pages both call), ``http`` (the JSON API ``app`` and the owner ``token``),
``status``, ``notices``, ``buttons_bridge``, ``lock``, ``sdnotify`` and ``unit``
(systemd). ``frame/cli/daemon.py`` holds the commands. Importing this package is cheap; heavy modules
load only in worker processes.
"""
