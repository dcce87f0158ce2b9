"""Short children of the worker kind (issue 27): each under its own cap, one of a kind at a time, a
refusal's message for the owner as it is; and the thumbnails they make, bounded on disk."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from frame.daemon.jobs import children
from frame.daemon.jobs.children import ChildBusy, ChildFailed, run_child
from frame.daemon.store import gallery, thumbs
from frame.worker.shortjobs import CheckJob, ImageLimits, PhotoJob, ThumbsJob
from tests.web.conftest import seed


def _png(path, size, mode="RGB"):
    Image.new(mode, size, (200, 30, 40)).save(path, "PNG", compress_level=1)
    return path


def test_an_image_child_past_its_address_space_cap_refuses_with_the_cap_named(tmp_path):
    """The cap is real: a 3000×3000 PNG (36 MB of pixels) passes a generous decode budget but not a
    48 MiB address space; the child fails with MemoryError, reported as a refusal naming the cap."""
    source = _png(tmp_path / "big.png", (3000, 3000))
    job = PhotoJob(out=tmp_path / "out", limits=ImageLimits(60_000_000, 10**9, 48), max_side=2048, jpeg_quality=90)
    with open(source, "rb") as stdin, pytest.raises(ChildFailed) as failed:
        run_child(job, timeout=60, stdin=stdin)
    assert failed.value.refused and "needs more memory than the frame gives it (48 MiB)" in str(failed.value)
    roomy = PhotoJob(out=tmp_path / "out", limits=ImageLimits(60_000_000, 10**9, 176), max_side=2048,
                     jpeg_quality=90)
    with open(source, "rb") as stdin:
        result = run_child(roomy, timeout=60, stdin=stdin)
    assert (result.width, result.height) == (2048, 2048) and result.file.suffix == ".png"


def test_a_child_above_its_resident_cap_is_killed_and_says_so(tmp_path):
    """The check child imports numpy (~35 MiB): with a 20 MiB cap the daemon's poll kills it."""
    config = tmp_path / "config.yaml"
    config.write_text("model:\n  steps: 4\n")
    with pytest.raises(ChildFailed) as failed:
        run_child(CheckJob(config=config, what="file", cap_mb=20), timeout=60)
    assert "more than its cap of 20 MiB" in str(failed.value) and not failed.value.refused


def test_one_image_child_at_a_time_and_a_waiting_request_is_told_to_come_back(tmp_path):
    job = ThumbsJob(items=(), limits=ImageLimits(1000, 1000, 176), size=360)
    assert children.SLOTS["imagechild"].acquire(timeout=1)
    try:
        with pytest.raises(ChildBusy, match="try again in a minute"):
            run_child(job, timeout=60, wait=0.05)
    finally:
        children.SLOTS["imagechild"].release()
    assert run_child(job, timeout=60).made == ()


def test_thumbnails_live_on_disk_and_go_with_their_picture(tmp_path):
    """The thumbnail of a picture retention deletes is deleted with it (the in-memory cache kept them,
    issue 27), and the folder stays within its byte budget, least recently served first."""
    from frame.daemon.store.database import Store

    state_dir = tmp_path / "state"
    state_dir.mkdir()
    store = Store.open(state_dir)
    try:
        ids = seed(store, state_dir)
        old, new = store.picture(ids["old"]), store.picture(ids["new"])
        items = tuple((gallery.picture_path(state_dir, p.file), thumbs.thumb_path(state_dir, p.file))
                      for p in (old, new))
        thumbs.thumb_dir(state_dir).mkdir()
        result = run_child(ThumbsJob(items=items, limits=ImageLimits(60_000_000, 10**8, 176), size=360), timeout=60)
        assert sorted(result.made) == sorted(target for _, target in items) and result.failed == ()
        with Image.open(io.BytesIO(items[0][1].read_bytes())) as image:
            assert image.format == "JPEG" and image.size == (360, 216)
        gallery.remove_picture(store, state_dir, old.id)
        assert not items[0][1].exists() and items[1][1].exists()
        assert thumbs.prune(state_dir, max_bytes=1) == 1 and not items[1][1].exists()
    finally:
        store.close()


def test_a_save_whose_model_checks_cannot_run_is_refused_and_says_why(tmp_path, monkeypatch):
    """The deep checks run in the check child; when it cannot answer (here: killed above a 20 MiB cap)
    nothing is saved and the owner reads why, instead of a save that skipped its checks."""
    from frame.daemon import settings
    from frame.daemon.jobs import config_checks

    monkeypatch.setattr(config_checks, "CHECK_CAP_MB", 20)
    monkeypatch.setattr(config_checks, "_answers", {})
    editor = settings.SettingsEditor(None, environ={}, state_dir=tmp_path)
    proposal = editor.propose({"schedule.render_at": "02:30"})
    assert not proposal.ok and not (tmp_path / "settings.yaml").exists()
    [message] = proposal.problems[settings.GENERAL]
    assert "could not be checked, so nothing was saved" in message and "cap of 20 MiB" in message
    monkeypatch.setattr(config_checks, "CHECK_CAP_MB", children.CHECK_CAP_MB)
    assert editor.propose({"schedule.render_at": "02:30"}).ok
