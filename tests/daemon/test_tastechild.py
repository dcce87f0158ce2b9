"""The trained taste model chooses in a child of the worker (frame/worker/tastechild.py)."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from frame.daemon.jobs import night
from frame.statefile import read_json, write_json
from frame.worker import choose as tastechoice
from frame.worker import tastechild
from frame.worker.records import RenderJob, ThemeChoice, Why
from tests.daemon.conftest import make_config

THEMES = ("a stormy sea", "a calm meadow", "a night city")
RATED = [("a stormy sea", 1), ("a calm meadow", -1), ("a night city", 1), ("a stormy sea", 1),
         ("a calm meadow", -1), ("a quiet lake", -1)]


def fake_embed(texts):
    """A fixed vector per text (the real text encoder's job), counting its calls."""
    fake_embed.calls += 1
    return np.stack([np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).standard_normal(16)
                     for t in texts])


fake_embed.calls = 0


def _job_folder(tmp_path, ratings=RATED, min_ratings=4):
    config = make_config(tmp_path, taste={"min_ratings": min_ratings, "explore_rate": 0.0, "themes": THEMES,
                                          "styles": ("oil painting",)})
    job = {"kind": "render", "render_id": 1, "render_kind": "night", "state_dir": str(tmp_path), "seed": 1234,
           "choice": None, "recent_themes": [],
           "candidates": [{"prompt": f"{t}, oil painting", "theme": t, "style": "oil painting", "weight": 1.0,
                           "origin": "theme"} for t in THEMES],
           "history": [{"id": n, "prompt": f"{t}, oil painting", "theme": t, "style": "oil painting",
                        "origin": "theme", "rating_kind": "thumb", "rating_value": v, "why": {"candidate": None}}
                       for n, (t, v) in enumerate(ratings)]}
    job = RenderJob.from_json(job)
    folder = tmp_path / "job"
    folder.mkdir()
    night.write_job_files(folder, config, job)
    return job, config, folder


def test_the_child_chooses_as_the_worker_did_in_process_once_even_across_a_power_cut(tmp_path, monkeypatch):
    job, config, folder = _job_folder(tmp_path)
    in_process = tmp_path / "in-process"
    in_process.mkdir()
    expected = tastechoice.pick(job, config, fake_embed, in_process)
    # the power cut came after the worker embedded the texts: the next worker must not embed again
    texts = sorted(set(tastechild.texts_to_embed(job, config)))
    write_json(folder / tastechild.INPUT_NAME, {"texts": texts, "vectors": fake_embed(texts).tolist()})

    def no_encoder(texts):
        raise AssertionError("embedded again after a restart")

    chosen = tastechild.choose(job, config, no_encoder, folder)

    assert chosen.why.details["mode"] == "model" and chosen.why.plot == "why.png"
    assert chosen == ThemeChoice.from_json(json.loads(json.dumps(expected.to_json())))
    assert ThemeChoice.from_json(read_json(folder / tastechild.CHOICE_NAME)) == chosen
    assert (folder / "why.png").read_bytes() == (in_process / "why.png").read_bytes()
    monkeypatch.setattr(tastechild, "run_child", lambda *a: pytest.fail("the choice was made twice"))
    assert tastechild.choose(job, config, no_encoder, folder) == chosen  # resumed after the choice


def test_the_worker_embeds_every_text_the_picker_asks_for_in_one_call(tmp_path, monkeypatch):
    job, config, folder = _job_folder(tmp_path)
    calls = fake_embed.calls
    monkeypatch.setattr(tastechild, "run_child", lambda folder: tastechild.choose_here(folder))
    assert tastechild.choose(job, config, fake_embed, folder).why.details["mode"] == "model"
    assert fake_embed.calls == calls + 1


def test_a_failed_child_fails_the_choose_step_with_its_message(tmp_path):
    job, config, folder = _job_folder(tmp_path)
    (folder / "job.json").unlink()
    with pytest.raises(tastechild.ChoiceFailed, match="could not choose: no readable job.json") as failure:
        tastechild.choose(job, config, fake_embed, folder)
    assert failure.value.step == "choose" and not (folder / tastechild.CHOICE_NAME).exists()


def test_a_killed_child_is_a_failure_the_supervisor_retries(tmp_path, monkeypatch):
    killed = subprocess.CompletedProcess([], -9, stdout="", stderr="")
    monkeypatch.setattr(tastechild.subprocess, "run", lambda *a, **k: killed)
    with pytest.raises(RuntimeError, match="could not choose: exit status -9"):
        tastechild.run_child(tmp_path)


def test_the_child_names_a_text_it_has_no_vector_for_and_reports_crashes_as_one_line(tmp_path, capsys):
    job, config, folder = _job_folder(tmp_path)
    write_json(folder / tastechild.INPUT_NAME, {"texts": ["a stormy sea, oil painting"], "vectors": [[1.0, 0.0]]})
    assert tastechild.main([str(folder)]) == tastechild.EXIT_PERMANENT
    assert "taste-input.json has no embedding for" in capsys.readouterr().err
    texts = sorted(set(tastechild.texts_to_embed(job, config)))
    write_json(folder / tastechild.INPUT_NAME, {"texts": texts, "vectors": [[1.0]] + [[1.0, 2.0]] * (len(texts) - 1)})
    assert tastechild.main([str(folder)]) == 1
    assert capsys.readouterr().err.startswith("ValueError: ")
    assert not (folder / tastechild.CHOICE_NAME).exists()


def test_without_enough_ratings_the_variety_choice_needs_no_child(tmp_path, monkeypatch):
    job, config, folder = _job_folder(tmp_path, ratings=RATED[:2])
    monkeypatch.setattr(tastechild, "run_child", lambda *a: pytest.fail("a child for a variety choice"))
    assert tastechild.choose(job, config, fake_embed, folder).why.details["mode"] == "variety"
    assert not (folder / tastechild.INPUT_NAME).exists()


def test_without_matplotlib_the_model_explains_in_words_and_notes_the_missing_plot(tmp_path, monkeypatch):
    job, config, folder = _job_folder(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as when frame[plots] is not installed
    why = tastechoice.pick(job, config, fake_embed, folder).why.to_json()
    assert why["mode"] == "model" and why["sentence"].startswith("expected liking")
    assert why["plot"] is None and why["plot_note"] == tastechoice.NO_MATPLOTLIB
    assert not (folder / "why.png").exists()
    # issue 40 item 19: the hint named the registry's 'frame[plots]'; it is the checkout's install now
    assert "frame[plots]" not in why["plot_note"] and "-m pip install -e" in why["plot_note"]
    assert f"{Path(__file__).resolve().parents[2]}[plots]" in why["plot_note"]


PROBE = ("import json, sys; from frame.worker import {module} as child; code = child.main([sys.argv[1]]); "
         "print(json.dumps([code, sorted(m for m in ('matplotlib', 'sklearn', 'scipy') if m in sys.modules)]))")


def _run_child(module, folder):
    done = subprocess.run([sys.executable, "-c", PROBE.format(module=module), str(folder)], capture_output=True,
                          text=True, timeout=300)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_the_taste_child_trains_without_matplotlib_and_the_plot_child_draws_without_scikit_learn(tmp_path):
    """Issue 27's Pi twin: one child holding scikit-learn, scipy and matplotlib peaked at 201 MiB (x86)
    beside the waiting worker; the plot's numbers now pass to a child of their own."""
    job, config, folder = _job_folder(tmp_path)
    texts = sorted(set(tastechild.texts_to_embed(job, config)))
    write_json(folder / tastechild.INPUT_NAME, {"texts": texts, "vectors": fake_embed(texts).tolist()})

    (code, modules), err = _run_child("tastechild", folder)
    assert code == 0, err
    assert "sklearn" in modules and "matplotlib" not in modules  # the model trained; nothing drawn here
    assert (folder / tastechoice.PLOT_DATA_NAME).is_file() and not (folder / "why.png").exists()
    assert ThemeChoice.from_json(read_json(folder / tastechild.CHOICE_NAME)).why.plot == "why.png"

    (code, modules), err = _run_child("plotchild", folder)
    assert code == 0, err
    assert modules == ["matplotlib"]  # no scikit-learn, no scipy
    in_process = tmp_path / "in-process"
    in_process.mkdir()
    tastechoice.pick(job, config, fake_embed, in_process)
    assert (folder / "why.png").read_bytes() == (in_process / "why.png").read_bytes()


def test_a_power_cut_between_the_choice_and_the_plot_draws_it_and_a_failed_plot_is_noted(tmp_path, monkeypatch):
    job, config, folder = _job_folder(tmp_path)
    texts = sorted(set(tastechild.texts_to_embed(job, config)))
    write_json(folder / tastechild.INPUT_NAME, {"texts": texts, "vectors": fake_embed(texts).tolist()})
    assert tastechild.main([str(folder)]) == 0  # the taste child chose; the worker died before the plot
    monkeypatch.setattr(tastechild, "run_child", lambda *a: pytest.fail("the choice was made twice"))
    chosen = tastechild.choose(job, config, fake_embed, folder)
    assert chosen.why.plot == "why.png" and (folder / "why.png").is_file()

    (folder / "why.png").unlink()
    write_json(folder / tastechoice.PLOT_DATA_NAME, {"classes": ["liked"], "panels": "not panels"})
    noted = tastechild.choose(job, config, fake_embed, folder)
    assert noted.why.plot is None and noted.why.details["plot_note"].startswith("No plot tonight: ")
    assert "Error" in noted.why.details["plot_note"]  # the plot child's own line
    assert ThemeChoice.from_json(read_json(folder / tastechild.CHOICE_NAME)) == noted  # and kept: not retried
    assert noted.prompt == chosen.prompt and not (folder / "why.png").exists()


def test_the_waiting_worker_hands_its_freed_heap_back_before_each_child_starts(tmp_path, monkeypatch):
    """The worker waits beside the child with what loading and embedding freed still in malloc's
    arenas (81.3 -> 68.5 MiB VmRSS on x86 after malloc_trim): it returns it first."""
    events = []
    monkeypatch.setattr(tastechild, "trim_free_memory", lambda: events.append("trim"))

    def child(command, **kwargs):
        events.append(command[2])
        return subprocess.CompletedProcess(command, 1, stdout="", stderr="ValueError: no\n")

    monkeypatch.setattr(tastechild.subprocess, "run", child)
    with pytest.raises(RuntimeError):
        tastechild.run_child(tmp_path)
    write_json(tmp_path / tastechoice.PLOT_DATA_NAME, {"classes": [], "panels": []})
    choice = ThemeChoice(prompt="p", negative_prompt="", theme="t", style="s", origin="theme",
                         why=Why("taste (model)", "liked", {"plot": "why.png"}))
    assert tastechild.draw_plot(tmp_path, choice).why.plot is None
    assert events == ["trim", "frame.worker.tastechild", "trim", "frame.worker.plotchild"]


def test_the_texts_are_embedded_in_a_child_so_the_worker_waits_without_its_pipeline(tmp_path):
    """The Pi twin: a worker that had loaded the pipeline to embed waited at 138 MiB (emulated) beside
    the taste child, which was OOM-killed; one that had loaded nothing was 80 MiB and it fitted."""
    from frame.worker.embeddings import COUNTS_NAME

    job, config, folder = _job_folder(tmp_path)

    def no_encoder(texts):
        raise AssertionError("the worker embedded: its pipeline would wait beside the taste child")

    chosen = tastechild.choose(job, config, no_encoder, folder, embed_apart=tastechild.embed_in_child)
    assert chosen.why.details["mode"] == "model" and (folder / "why.png").is_file()
    inputs = read_json(folder / tastechild.INPUT_NAME)
    assert inputs["texts"] == sorted(set(tastechild.texts_to_embed(job, config)))
    assert len(inputs["vectors"]) == len(inputs["texts"]) and len(inputs["vectors"][0]) > 1  # the demo encoder's
    assert read_json(folder / COUNTS_NAME)["embedded"] == len(inputs["texts"])

    (folder / "job.json").unlink()
    (folder / tastechild.INPUT_NAME).unlink()
    with pytest.raises(tastechild.ChoiceFailed, match="could not be embedded: no readable job.json"):
        tastechild.embed_in_child(folder)
