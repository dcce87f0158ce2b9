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


FEED_URL = "https://bob:hunter2@nas.local:8443/prompts.json?key=K3Y-VALUE&lang=en"
MODEL_URL = "https://alice:pa55word@models.lan/sd15/?sig=S1GNATURE"
SECRETS = ("hunter2", "K3Y-VALUE", "pa55word", "S1GNATURE", "bob", "alice")


def _config_file(tmp_path, extra: str = "") -> object:
    path = tmp_path / "config.yaml"
    path.write_text(f"""model:
  source: "{MODEL_URL}"
feeds:
  sources:
    - url: "{FEED_URL}"
      format: json
web:
  token: owner-token-for-tests
{extra}""", encoding="utf-8")
    return path


def test_url_fields_are_marked_in_the_schema_not_found_by_name():
    """Every field checked as a URL carries the URL_SECRET marking, so no printer has to guess by name."""
    import dataclasses
    import typing

    from frame.config import Config, checks
    from frame.config.schema import URL_SECRET

    def walk(cls):
        hints = typing.get_type_hints(cls)
        for spec in dataclasses.fields(cls):
            tp = hints[spec.name]
            inner = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple and typing.get_args(tp) else None
            if dataclasses.is_dataclass(tp):
                yield from walk(tp)
            elif inner is not None and dataclasses.is_dataclass(inner):
                yield from walk(inner)
            else:
                yield f"{cls.__name__}.{spec.name}", spec.metadata.get("check"), spec.metadata.get("secret")

    fields = list(walk(Config))
    url_checks = (checks.http_url, checks.http_url_or_empty, checks.model_source, checks.tiny_vae)
    url_fields = {name: secret for name, check, secret in fields if check in url_checks}
    assert url_fields == {"ModelConfig.source": URL_SECRET, "ModelConfig.vae_decoder": URL_SECRET,
                          "RemoteRenderConfig.url": URL_SECRET,
                          "FeedSource.url": URL_SECRET, "MqttConfig.frame_url": URL_SECRET}
    assert [name for name, _, secret in fields if secret is True] == [
        "ModelConfig.token", "RemoteRenderConfig.password", "RemoteRenderConfig.token", "WebConfig.token",
        "MqttConfig.password"]


def test_to_plain_hides_url_credentials_and_tokens(tmp_path):
    from frame.config import to_plain

    plain = to_plain(load_config(_config_file(tmp_path), environ={}))
    assert plain["model"]["source"] == "https://***@models.lan/sd15/?sig=***"
    assert plain["feeds"]["sources"][0]["url"] == "https://***@nas.local:8443/prompts.json?key=***&lang=***"
    assert plain["web"]["token"] == "***"
    revealed = to_plain(load_config(_config_file(tmp_path), environ={}), reveal_secrets=True)
    assert revealed["feeds"]["sources"][0]["url"] == FEED_URL


def test_frame_config_show_prints_no_credentials(tmp_path, capsys):
    from frame.cli.program import main

    assert main(["--config", str(_config_file(tmp_path)), "config", "show"]) == 0
    out = capsys.readouterr().out
    assert "nas.local:8443/prompts.json?key=***" in out and "models.lan" in out
    assert not [s for s in SECRETS if s in out]


def test_config_check_problems_do_not_echo_url_credentials(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text('feeds:\n  sources:\n    - url: "ftp://bob:hunter2@nas.local/f.json?key=K3Y-VALUE"\n'
                    'model:\n  source: "gopher://alice:pa55word@x/?sig=S1GNATURE"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    text = str(info.value)
    assert "feeds.sources[0].url: must be an http(s) URL" in text and "ftp://***@nas.local" in text
    assert not [s for s in SECRETS if s in text]


@pytest.mark.parametrize("url, shown", [
    ("https://u:p@h/x?a=1&b=2#frag", "https://***@h/x?a=***&b=***#frag"),
    ("http://h:8080/feed", "http://h:8080/feed"),
    ("https://h/x?SECRETONLY", "https://h/x?***"),
    ("/var/lib/frame/models/sd15", "/var/lib/frame/models/sd15"),
    ("demo", "demo"),
])
def test_redact_url(url, shown):
    from frame.redact import redact_url

    assert redact_url(url) == shown


def test_redact_text_finds_urls_inside_errors():
    from frame.redact import redact_text

    error = ("ConnectionError: HTTPSConnectionPool(host='nas', port=443): Max retries exceeded with url: "
             "/f.json?key=K3Y-VALUE&x=1 (Caused by ...); see https://bob:hunter2@nas/f.json")
    shown = redact_text(error)
    assert "/f.json?key=***&x=***" in shown and "https://***@nas/f.json" in shown
    assert "K3Y-VALUE" not in shown and "hunter2" not in shown
