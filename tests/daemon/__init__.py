"""Tests of frame.daemon (a package so module names like test_commands do not clash across folders)."""
