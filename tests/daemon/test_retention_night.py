"""Retention after a night's picture is stored: tonight's picture is never the one it deletes."""

from frame.daemon.jobs import night
from tests.daemon.conftest import add_picture, make_config
from tests.daemon.fakesupervisor import FakeSupervisor


def test_a_gallery_full_of_favourites_keeps_tonights_picture(tmp_path, store):
    """With max_pictures reached and every older picture a favourite (never deleted), retention took the
    only picture it could, the one just painted, so the frame never showed a new picture again: the
    daemon soak (benchmarks/daemon_soak.py, which rates pictures 4 stars) logged "picture N was deleted
    before it could be shown" after every render once 40 pictures were rated. Tonight's picture is kept
    (and the one on the panel); the gallery stays over its limit until others may go."""
    FakeSupervisor.render_status = "done"
    ctx = night.RenderContext(make_config(tmp_path, gallery={"max_pictures": 3}), store, tmp_path,
                              supervisor_factory=FakeSupervisor)
    favourites = [add_picture(store, file=f"{n}.png") for n in range(3)]
    for picture_id in favourites:
        store.rate(picture_id, "stars", 5)
    outcome, picture_id = night.render(ctx, store.start_render("now", None), "now")
    assert outcome.status == "done" and store.picture(picture_id) is not None
    assert {p.id for p in store.pictures()} == {*favourites, picture_id}
    # the next night, yesterday's picture (not shown, not a favourite) is the one retention takes
    _, next_id = night.render(ctx, store.start_render("now", None), "now")
    assert {p.id for p in store.pictures()} == {*favourites, next_id}
