"""The daemon's HTTP side: ``app`` (the JSON API and the app the phone pages join), the JSON API's
routes (``api``, ``queue_api``, ``settings_api``; what a change does is an owner action of
``frame.daemon.actions``), ``contract`` (what the daemon and the pages agree on) and ``token`` (the
owner token)."""
