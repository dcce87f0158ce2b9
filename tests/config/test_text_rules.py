"""Free text in the configuration (config.yaml and settings.yaml alike) follows the queue form's rule:
no control, format (bidi override), surrogate or private-use characters; and guidance has the queue's
upper end."""

from __future__ import annotations

from pathlib import Path

import pytest

from frame.config import checks, load_config
from frame.errors import ConfigError


def _problems(tmp_path: Path, text: str, settings: str | None = None) -> list[str]:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {state}\n{text}", encoding="utf-8")
    if settings is not None:
        (state / "settings.yaml").write_text(settings, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    return info.value.problems


def test_control_characters_in_free_text_are_named_with_their_field(tmp_path):
    problems = _problems(tmp_path, 'taste:\n  themes: [a, b, "c\\0d"]\n  styles: ["\\u202eoil"]\n'
                                   'model:\n  negative_prompt: "blurry\\x1b[31m"\n'
                                   'feeds:\n  sources:\n    - {url: "https://example.org/f", name: "n\\u2066",'
                                   ' template: "{title}\\x7f"}\n')
    assert problems[0] == "taste.themes[2]: contains a control character U+0000 (line 3)"
    assert problems[1] == ("taste.styles[0]: contains a control character U+202E (RIGHT-TO-LEFT OVERRIDE) "
                           "(line 4)")
    assert problems[2].startswith("model.negative_prompt: contains a control character U+001B (line 6)")
    assert problems[3].startswith("feeds.sources[0].name: contains a control character U+2066 (LEFT-TO-RIGHT")
    assert problems[4].startswith("feeds.sources[0].template: contains a control character U+007F")
    assert len(problems) == 5


def test_the_owner_layer_is_checked_the_same_way(tmp_path):
    from frame.config.loader import resolve

    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "config.yaml"
    path.write_text(f"state_dir: {state}\n", encoding="utf-8")
    (state / "settings.yaml").write_text('taste:\n  themes: ["a\\u202eb"]\n', encoding="utf-8")
    resolved = resolve(path, {})
    assert any(p.startswith("taste.themes[0]: contains a control character U+202E") for p in resolved.owner_problems)
    assert resolved.config.taste.themes != ("a\u202eb",)  # not used


def test_a_secrets_character_is_not_shown(tmp_path):
    (problem,) = _problems(tmp_path, 'render:\n  remote:\n    password: "pa\\x01ss"\n')
    assert problem.startswith("render.remote.password: contains a control character") and "U+0001" not in problem


def test_ordinary_text_and_line_breaks_pass(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text('taste:\n  themes: ["café au lait", "東京の夜", "a\\ttab", "🌊 waves"]\n'
                    "model:\n  negative_prompt: |\n    blurry,\n    text\n", encoding="utf-8")
    config = load_config(path, environ={})
    assert config.taste.themes[1] == "東京の夜" and config.model.negative_prompt == "blurry,\ntext\n"


def test_the_rule_allows_whitespace_and_names_what_it_refuses():
    for text in ("a\x00b", "a\u202eb", "a\u200bb", "a\ud800b", "a\ue000b"):
        assert checks.plain_text(text).startswith("contains a control character U+")
    assert checks.plain_text("a\x00b", secret=True) == "contains a control character"
    assert checks.plain_text("tab\tand\r\nnewline") is None
    # joiners are part of real text: a family emoji, Persian "می‌خواهم" (zero-width non-joiner)
    assert checks.plain_text("\U0001F468\u200d\U0001F469\u200d\U0001F467") is None
    assert checks.plain_text("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645") is None


@pytest.mark.parametrize("key", ["model:\n  guidance", "render:\n  remote:\n    guidance"])
def test_guidance_has_the_queues_upper_end(tmp_path, key):
    (problem,) = _problems(tmp_path, f"{key}: 31\n")
    assert "guidance: must be from 0 to 30, got 31" in problem
    path = tmp_path / "ok.yaml"
    path.write_text(f"{key}: 30\n", encoding="utf-8")
    load_config(path, environ={})
