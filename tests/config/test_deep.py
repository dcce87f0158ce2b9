"""``frame config check``'s deeper checks: names known to the display, suggested when misspelt."""

from frame.config import load_config
from frame.config.deep import deep_problems


def _display_problems(tmp_path, panel: str, palette: str) -> list[str]:
    path = tmp_path / "config.yaml"
    path.write_text(f"display:\n  panel: {panel}\n  palette: {palette}\n", encoding="utf-8")
    return [p for p in deep_problems(load_config(path, environ={})) if p.startswith("display.")]


def test_misspelt_panel_and_palette_get_a_suggestion(tmp_path):
    assert _display_problems(tmp_path, "waveshare-7in3g", "spectra7") == [
        "display.panel: unknown panel 'waveshare-7in3g'; did you mean 'waveshare-7in3f'?",
        "display.palette: unknown palette 'spectra7'; did you mean 'spectra6'?",
    ]


def test_unrecognisable_names_list_the_known_ones(tmp_path):
    from frame.display import palette_names

    problems = _display_problems(tmp_path, "virtual", "zzzzzz")
    assert problems == [f"display.palette: unknown palette 'zzzzzz' (known: {', '.join(palette_names())})"]
