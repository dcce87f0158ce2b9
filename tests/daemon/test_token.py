import os
import stat

import pytest

from frame.daemon import token
from frame.errors import FrameError


def test_generated_once_with_0600(tmp_path):
    first = token.ensure_token("", tmp_path)
    assert len(first) >= token.MIN_LENGTH
    mode = stat.S_IMODE(os.stat(token.token_path(tmp_path)).st_mode)
    assert mode == 0o600
    assert token.ensure_token("", tmp_path) == first
    assert token.read_token(tmp_path) == first


def test_configured_token_wins_and_writes_nothing(tmp_path):
    assert token.ensure_token("configured-token-123", tmp_path) == "configured-token-123"
    assert not token.token_path(tmp_path).exists()


def test_world_readable_token_file_is_refused(tmp_path):
    token.ensure_token("", tmp_path)
    os.chmod(token.token_path(tmp_path), 0o644)
    with pytest.raises(FrameError, match="chmod 600"):
        token.read_token(tmp_path)


def test_truncated_token_is_regenerated(tmp_path):
    path = token.token_path(tmp_path)
    path.write_text("abc")
    os.chmod(path, 0o600)
    new = token.ensure_token("", tmp_path)
    assert new != "abc" and token.read_token(tmp_path) == new


def test_header_check():
    assert token.token_matches("Bearer secret-token-xyz", "secret-token-xyz")
    assert not token.token_matches("Bearer wrong", "secret-token-xyz")
    assert not token.token_matches("secret-token-xyz", "secret-token-xyz")
    assert not token.token_matches(None, "secret-token-xyz")
