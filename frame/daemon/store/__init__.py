"""The daemon's SQLite store: ``database`` (the ``Store``), ``migrations`` (schema versions),
``recovery`` (backup and repair of a damaged database) and ``gallery`` (picture files and publishing)."""
