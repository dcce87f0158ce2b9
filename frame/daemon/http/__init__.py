"""The daemon's HTTP side: ``app`` (the JSON API and the app the phone pages join) and ``token``
(the owner token)."""
