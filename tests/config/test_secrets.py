"""What configuration printers and checks may show: secrets hidden, tokens usable over HTTP."""

from __future__ import annotations

import pytest

from frame.config import load_config
from frame.errors import ConfigError


@pytest.mark.parametrize("value", ["pässwort-token-1234", "токен-владельца-12", "owner-token-\u00a0x"])
def test_non_ascii_web_token_is_refused_by_the_check(tmp_path, value):
    """HTTP carries the token as latin-1: a non-ASCII one never matched and made 'frame queue' crash."""
    path = tmp_path / "config.yaml"
    path.write_text(f"web:\n  token: \"{value}\"\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    (problem,) = info.value.problems
    assert problem.startswith("web.token: must ")
    assert "ASCII" in problem or "whitespace" in problem
    assert value not in problem  # a secret is never echoed
