"""The A1111 JSON rules without a network: sampler names both ways, parameters from ``info``,
progress answers, the picture checks, and tonight's job from the configuration."""

from __future__ import annotations

import base64
import dataclasses
import io

import pytest
from PIL import Image

from frame.config.schema import Config, DisplayConfig, RemoteRenderConfig, RenderConfig
from frame.diffusion.samplers import sampler_names
from frame.remote import RemoteJob, RemoteUnavailable, night_job
from frame.remote.a1111 import (
    a1111_sampler,
    error_detail,
    frame_sampler,
    parameters_from_info,
    parse_progress,
    request_payload,
)
from frame.remote.picture import check_picture, decode_base64_image

JOB = RemoteJob("a koi pond", "", 20, 6.5, "euler_a", 7, 512, 320)


@pytest.mark.parametrize("frame_name", sampler_names())
def test_sampler_names_round_trip(frame_name):
    assert frame_sampler(a1111_sampler(frame_name)) == frame_name


def test_karras_schedule_type_of_newer_a1111_maps_back():
    assert frame_sampler("DPM++ 2M", "p\nSteps: 20, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7") == \
        "dpm++2m_karras"
    assert frame_sampler("DPM++ 2M", "p\nSteps: 20, Sampler: DPM++ 2M, Schedule type: Automatic") == "dpm++2m"
    assert frame_sampler("DPM++ SDE") == "DPM++ SDE"  # unknown to frame: kept as the server named it


def test_payload_is_one_picture_not_saved_on_the_server():
    payload = request_payload(JOB)
    assert payload["sampler_name"] == "Euler a" and payload["cfg_scale"] == 6.5
    assert (payload["batch_size"], payload["n_iter"], payload["save_images"]) == (1, 1, False)
    assert "init_images" not in payload


def test_parameters_fall_back_to_the_job_where_info_is_silent():
    params = parameters_from_info({}, JOB, "sd_xl_base_1.0")
    assert (params.prompt, params.steps, params.sampler, params.guidance, params.seed, params.width,
            params.height, params.model) == ("a koi pond", 20, "euler_a", 6.5, 7, 512, 320, "sd_xl_base_1.0")


def test_model_name_is_read_from_the_infotext_of_older_servers():
    info = {"seed": 1234, "infotexts": ['x\nSteps: 20, Sampler: Euler a, Model: "my, model", Version: v1.6']}
    params = parameters_from_info(info, JOB, "?")
    assert params.model == "my, model" and params.seed == 1234


def test_progress_idle_and_running():
    idle = parse_progress({"progress": 0, "eta_relative": 0, "state": {"job_count": 0}, "current_image": None})
    assert not idle.active and idle.preview_b64 is None
    running = parse_progress({"progress": 0.4, "eta_relative": 12.5, "current_image": "abc",
                              "state": {"job_count": 1, "sampling_step": 8, "sampling_steps": 20}})
    assert (running.active, running.fraction, running.eta_seconds, running.step, running.steps) == (
        True, 0.4, 12.5, 8, 20)
    with pytest.raises(RemoteUnavailable):
        parse_progress(["not", "a", "dict"])


def test_error_detail_reads_fastapi_and_a1111_errors():
    assert error_detail({"detail": "Not authenticated"}) == "Not authenticated"
    assert error_detail({"error": "RuntimeError", "detail": "", "errors": "CUDA out of memory"}) == \
        "CUDA out of memory"
    assert error_detail("text") == ""


def _png(size=(32, 16)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (1, 2, 3)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_picture_checks():
    assert check_picture(_png(), 32, 16).getpixel((0, 0)) == (1, 2, 3)
    prefixed = "data:image/png;base64," + base64.b64encode(_png()).decode()
    assert decode_base64_image(prefixed) == _png()
    with pytest.raises(RemoteUnavailable, match="not valid base64"):
        decode_base64_image("@@@")
    with pytest.raises(RemoteUnavailable, match="truncated"):
        check_picture(_png()[:-20], 32, 16)
    corrupt = bytearray(_png())
    corrupt[40] ^= 0xFF  # inside the image data: a CRC error
    with pytest.raises(RemoteUnavailable, match="does not decode") as info:
        check_picture(bytes(corrupt), 32, 16)
    assert info.value.reason == "bad-image"
    with pytest.raises(RemoteUnavailable) as info:
        check_picture(_png(), 16, 16)
    assert info.value.reason == "wrong-size"
    jpeg = io.BytesIO()
    Image.new("RGB", (32, 16)).save(jpeg, format="JPEG")
    assert check_picture(jpeg.getvalue(), 32, 16).size == (32, 16)  # samples_format: jpg servers


@pytest.mark.parametrize("display, size, expected", [
    (DisplayConfig(size="800x480"), "auto", (640, 384)),
    (DisplayConfig(size="800x480", rotate=90), "auto", (384, 640)),
    (DisplayConfig(size="800x480"), "1216x832", (1216, 832)),
])
def test_night_job_takes_the_remote_settings(display, size, expected):
    config = dataclasses.replace(Config(), display=display,
                                 render=RenderConfig("remote", RemoteRenderConfig(url="http://x:7860", size=size)))
    job = night_job(config, "a harbour", "blurry", 99)
    assert (job.width, job.height) == expected
    assert (job.steps, job.guidance, job.sampler, job.seed) == (25, 7.0, "dpm++2m_karras", 99)
