import os
import stat

import pytest

from frame.daemon.http import token
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


@pytest.mark.parametrize("content", [b"\xff\xfe garbage \x80\x81 not utf-8 at all", "pässwort-owner-token".encode(),
                                     b"token with spaces in it"])
def test_damaged_token_file_is_replaced_not_fatal(tmp_path, content, caplog):
    """A token file that cannot be a token (bytes from a bad write, accents, spaces) used to stop every
    start (a systemd restart loop); now a new token is generated and the log says why."""
    path = token.token_path(tmp_path)
    path.write_bytes(content)
    os.chmod(path, 0o600)
    assert token.read_token(tmp_path) is None
    new = token.ensure_token("", tmp_path)
    assert token.token_problem(new) is None and token.read_token(tmp_path) == new
    assert "damaged" in caplog.text and str(path) in caplog.text


def test_daemon_starts_with_a_non_utf8_token_file(tmp_path):
    from frame.daemon.service import Daemon
    from tests.daemon.conftest import make_config

    path = token.token_path(tmp_path)
    path.write_bytes(b"\xff" * 30)
    os.chmod(path, 0o600)
    daemon = Daemon(make_config(tmp_path, web={"listen": "127.0.0.1:0"}))
    try:
        assert token.token_problem(daemon.token) is None and token.read_token(tmp_path) == daemon.token
    finally:
        daemon.stop()


@pytest.mark.parametrize("text, ok", [("owner-token-123", True), ("ä" * 12, False), ("owner token 12", False),
                                      ("short", False), ("tab\there-0123456", False)])
def test_token_rule(text, ok):
    assert (token.token_problem(text) is None) is ok
