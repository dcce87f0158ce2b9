"""The owner's actions, written once: what the JSON API (``frame.daemon.http``) and the phone pages
(``frame.web``) both call when the owner queues, edits, moves or removes a prompt, reuses a seed, asks
for a variation, rates, shows or deletes a picture, starts a render, or saves, restores or restarts
the settings (``queue``, ``pictures``, ``settings``).

Each action looks up what it names, checks it with the daemon's rules (``frame.daemon.queue``,
``frame.daemon.deletion``, ``frame.daemon.settings``), stores it and logs it, and raises the errors of
``errors`` when it cannot: each side turns them into its own answer (JSON with a status, or a page,
a flashed message and a redirect). Reading the request (a JSON body, a form) stays on each side.
"""
