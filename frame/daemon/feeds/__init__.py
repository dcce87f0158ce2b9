"""Remote prompt feeds: ``fetch`` (polling, caching and health) and ``parse`` (JSON, RSS and text
feeds, sanitised)."""
