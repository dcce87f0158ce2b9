"""The info screen: the phone page's address, the facts from the store, drawing at the panel's size."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from datetime import UTC
from zoneinfo import ZoneInfo

import pytest
from PIL import Image

from frame.daemon.jobs import info as infoscreen
from frame.daemon.jobs.info import info_facts, lan_address, page_url
from frame.daemon.jobs.supervisor import Outcome
from frame.errors import FrameError
from frame.worker import infoscreen as worker_infoscreen
from frame.worker.infoscreen import draw_job, render_info, wrap
from frame.worker.records import EXIT_PERMANENT, InfoFacts, ShowJob
from tests.daemon.conftest import add_picture, make_config

RED = (220, 20, 20)


def test_page_url_for_a_wildcard_bind_uses_the_lan_address():
    assert page_url("0.0.0.0:8080", lan=lambda: "192.168.1.20") == "http://192.168.1.20:8080/"
    assert page_url("[::]:8080", port=9000, lan=lambda: "10.0.0.7") == "http://10.0.0.7:9000/"


def test_page_url_falls_back_to_the_host_name():
    assert page_url("0.0.0.0:8080", lan=lambda: None, hostname=lambda: "frame") == "http://frame.local:8080/"
    assert page_url("0.0.0.0:80", lan=lambda: None, hostname=lambda: "frame.home.lan") == \
        "http://frame.home.lan:80/"


def test_page_url_keeps_an_explicit_address():
    def never():
        raise AssertionError("no lookup for an explicit address")

    assert page_url("192.168.1.5:8080", lan=never) == "http://192.168.1.5:8080/"
    assert page_url("[fe80::1]:8080", lan=never) == "http://[fe80::1]:8080/"


def test_lan_address_is_a_routable_ipv4_address_or_none():
    address = lan_address()
    if address is not None:
        parsed = ipaddress.IPv4Address(address)
        assert not parsed.is_loopback and not parsed.is_unspecified


@pytest.fixture
def picture(store, tmp_path):
    (tmp_path / "gallery").mkdir()
    Image.new("RGB", (60, 40), RED).save(tmp_path / "gallery" / "red.png")
    picture_id = add_picture(store, "a red barn in the snow", file="red.png", theme="winter", style="gouache",
                             why={"sentence": "you liked snowy scenes", "method": "taste (model)"})
    store.rate(picture_id, "stars", 4)
    return picture_id


def test_info_facts_from_the_store(store, tmp_path, picture):
    created = store.picture(picture).created_at
    facts = info_facts(store, tmp_path, picture, "http://x:1/", ZoneInfo("Pacific/Auckland"))
    assert facts.title == f"Picture {picture}" and facts.prompt == "a red barn in the snow"
    assert facts.why == "you liked snowy scenes" and facts.url == "http://x:1/"
    assert facts.image == str(tmp_path / "gallery" / "red.png")
    details = dict(facts.details)
    assert details["Theme"] == "winter, gouache" and details["Rating"] == "4 of 5 stars (a favourite)"
    from datetime import datetime

    local = datetime.fromisoformat(created).astimezone(ZoneInfo("Pacific/Auckland"))
    assert details["Painted"].startswith(f"{local.day} {local:%b %Y}") and details["Painted"].endswith(f"{local:%H:%M}")
    assert InfoFacts.from_json(json.loads(json.dumps(facts.to_json()))) == facts  # travels to the worker as JSON


def test_info_facts_without_a_picture_or_its_file(store, tmp_path):
    facts = info_facts(store, tmp_path, None, "http://x:1/", UTC)
    assert facts.title == "No picture on the frame yet" and facts.image is None and facts.url == "http://x:1/"
    missing = add_picture(store, "gone", file="gone.png")
    store.rate(missing, "thumb", -1)
    facts = info_facts(store, tmp_path, missing, "u", UTC)
    assert facts.image is None and dict(facts.details)["Rating"] == "disliked"


def test_wrap_fits_the_width_and_marks_what_was_left_out():
    font = worker_infoscreen._font(16)
    text = "a lighthouse on a cliff in a storm at night with waves breaking over the rocks " * 3
    lines = wrap(text, font, 150, 3)
    assert len(lines) == 3 and lines[-1].endswith("...")
    assert all(font.getlength(line) <= 150 for line in lines)
    cut = wrap("x" * 80, font, 100, 10)  # one word wider than the line is cut, not overflowing
    assert len(cut) > 1 and "".join(cut) == "x" * 80 and all(font.getlength(line) <= 100 for line in cut)
    assert wrap("", font, 100, 3) == [] and wrap("anything", font, 100, 0) == []


def _facts(tmp_path, prompt="a red barn in the snow"):
    Image.new("RGB", (60, 40), RED).save(tmp_path / "red.png")
    return InfoFacts(picture_id=1, image=str(tmp_path / "red.png"), title="Picture 1", prompt=prompt,
                     details=(("Theme", "winter"), ("Rating", "liked"), ("Painted", "1 Dec 2026, 06:00")),
                     why="you liked snowy scenes", url="http://192.168.1.20:8080/")


@pytest.mark.parametrize("size", [(800, 480), (480, 800), (160, 96)])
def test_render_info_draws_picture_and_text_at_the_panel_size(tmp_path, size):
    image = render_info(_facts(tmp_path, prompt="very long prompt words " * 40), size)
    assert image.size == size and image.mode == "RGB"
    colours = {colour for _, colour in image.getcolors(maxcolors=size[0] * size[1])}
    assert RED in colours  # the picture, small
    assert (0, 0, 0) in colours and (255, 255, 255) in colours
    bottom = image.crop((0, size[1] * 3 // 4, size[0], size[1])).convert("L")
    assert bottom.getextrema()[0] < 100  # the phone page's address along the bottom


def test_render_info_without_a_picture(tmp_path):
    blank = render_info(InfoFacts.from_json({"title": "", "url": ""}), (200, 120))
    shown = render_info(InfoFacts.from_json({"title": "No picture on the frame yet", "url": "http://frame.local:8080/"}),
                        (200, 120))
    assert blank.tobytes() != shown.tobytes()


def _job(tmp_path, rotate=0, facts=None):
    from frame.daemon.jobs.night import write_job_files

    config = make_config(tmp_path, display={"size": "160x96", "rotate": rotate},
                         web={"listen": "127.0.0.1:8080", "token": "test-token-123456"})
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    write_job_files(job_dir, config, ShowJob(state_dir=tmp_path, image=job_dir / "info.png",
                                             info=facts or _facts(tmp_path)))
    return job_dir


@pytest.mark.parametrize(("rotate", "size"), [(0, (160, 96)), (90, (96, 160))])
def test_draw_job_draws_upright_for_the_rotation(tmp_path, rotate, size):
    job_dir = _job(tmp_path, rotate)
    assert draw_job(job_dir) == 0
    with Image.open(job_dir / "info.png") as drawn:
        assert drawn.size == size
    before = (job_dir / "info.png").stat().st_mtime_ns
    assert draw_job(job_dir) == 0 and (job_dir / "info.png").stat().st_mtime_ns == before  # a restart reuses it


def test_draw_job_reports_a_broken_picture_as_permanent(tmp_path, capsys):
    (tmp_path / "broken.png").write_bytes(b"not a png")
    facts = dataclasses.replace(_facts(tmp_path), image=str(tmp_path / "broken.png"))
    job_dir = _job(tmp_path, facts=facts)
    assert draw_job(job_dir) == EXIT_PERMANENT
    event = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert event["event"] == "error" and event["step"] == "info screen"
    assert not (job_dir / "info.png").exists()


class _FailingSupervisor:
    command = None

    def __init__(self, memory_limit_mb, max_restarts, **kwargs):
        _FailingSupervisor.command = kwargs.get("command")

    def run(self, job_dir, *, stop, deadline=None):
        assert json.loads((job_dir / "job.json").read_text())["data"]["info"]["url"] == "u"
        return Outcome("failed", error="no panel", step="show")


def test_show_info_runs_the_info_worker_and_reports_failure(store, tmp_path):
    from frame.daemon.jobs.night import RenderContext

    ctx = RenderContext(config=make_config(tmp_path), store=store, state_dir=tmp_path,
                        supervisor_factory=_FailingSupervisor)
    with pytest.raises(FrameError, match="info screen failed at step 'show': no panel"):
        infoscreen.show_info(ctx, InfoFacts.from_json({"url": "u"}))
    assert _FailingSupervisor.command[-2:] == ["-m", "frame.worker.infoscreen"]
    assert list((tmp_path / "checkpoints").iterdir()) == []  # the job folder is removed
