"""OnnxStream's published SD folder layouts as a model.source: same pictures as the diffusers layout.

The folders are written at test time from the tiny fixture pipelines by ``tools/onnxstream_layout.py``
(published folder names, published graph I/O names, fp16 UNet/VAE, uint8 VAE + range_data.txt), then
stripped to what OnnxStream's own ``--download`` leaves (conv weights as ``_nhwc.bin`` only).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from frame.diffusion import RenderPlan, load_pipeline
from frame.diffusion.onnxstream_layout import OnnxStreamFiles
from frame.diffusion.tokenizer import ClipTokenizer
from frame.engine.onnxstream.summary import read_ops, weight_files
from frame.errors import FrameError
from frame.models import demo_model_path
from tests.engine.http_server import RangeServer
from tests.painting import paint

pytest.importorskip("onnxruntime")  # the layout tool calibrates range_data.txt with it
ROOT = Path(__file__).resolve().parents[2]
PIPELINES = ROOT / "tests" / "fixtures" / "pipelines"

# What each published Hugging Face repository holds (besides .gitattributes and README.md): from the
# repositories' file listings (SDXL base) and from the lists OnnxStream's sd app downloads (sd.cpp);
# every model folder also holds the .bin files its model.txt names (conv weights as _nhwc.bin).
PUBLISHED = {
    "vitoplantamura/stable-diffusion-1.5-onnxstream": {
        "tokenizer": {"vocab.txt", "merges.txt"},
        "text_encoder_fp32": {"model.txt"},
        "unet_fp16": {"model.txt"},
        "vae_decoder_fp16": {"model.txt"},
        "vae_decoder_qu8": {"model.txt", "range_data.txt"},
    },
    "vitoplantamura/stable-diffusion-xl-base-1.0-onnxstream": {
        "sdxl_tokenizer": {"vocab.txt", "merges.txt"},
        "sdxl_text_encoder_1_fp32": {"model.txt"},
        "sdxl_text_encoder_2_fp32": {"model.txt"},
        "sdxl_unet_fp16": {"model.txt"},
        "sdxl_vae_decoder_32x32_fp16": {"model.txt"},
        "sdxl_vae_decoder_fp16": {"model.txt"},
    },
    "vitoplantamura/stable-diffusion-xl-turbo-1.0-anyshape-onnxstream": {
        "sdxl_tokenizer": {"vocab.txt", "merges.txt"},
        "sdxl_text_encoder_1_fp32": {"model.txt"},
        "sdxl_text_encoder_2_fp32": {"model.txt"},
        "sdxl_unet_anyshape_fp16": {"model.txt"},
        "sdxl_vae_decoder_anyshape_fp16": {"model.txt"},
    },
}
SD15, SDXL, TURBO = PUBLISHED


def _tool():
    spec = importlib.util.spec_from_file_location("onnxstream_layout", ROOT / "tools" / "onnxstream_layout.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def as_downloaded(folder: Path, repo: str) -> Path:
    """Keep only what OnnxStream's --download fetches: the listed files and each model.txt's _nhwc weights."""
    for component in folder.iterdir():
        expected = PUBLISHED[repo][component.name]
        if (component / "model.txt").is_file():
            expected = expected | set(weight_files(read_ops(str(component)), conv="nhwc"))
        for path in component.iterdir():
            if path.name not in expected:
                path.unlink()
    return folder


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The three layouts as the converter writes them (both conv files, as OnnxStream's notebook)."""
    tool, base = _tool(), tmp_path_factory.mktemp("onnxstream")
    return {SD15: tool.write_sd15(PIPELINES / "sd15" / "model", base / "sd15"),
            SDXL: tool.write_sdxl(PIPELINES / "sdxl" / "model", base / "sdxl", tile=4),
            TURBO: tool.write_sdxl(PIPELINES / "sdxl" / "model", base / "turbo", turbo=True)}


@pytest.fixture(scope="module")
def downloaded(written, tmp_path_factory):
    base = tmp_path_factory.mktemp("downloaded")
    return {repo: as_downloaded(Path(shutil.copytree(folder, base / folder.name)), repo)
            for repo, folder in written.items()}


@pytest.mark.parametrize("repo", list(PUBLISHED))
def test_converter_writes_the_published_file_list(written, repo):
    folder = written[repo]
    assert {p.name for p in folder.iterdir()} == set(PUBLISHED[repo])
    for component, files in PUBLISHED[repo].items():
        present = {p.name for p in (folder / component).iterdir()}
        assert {name for name in present if not name.endswith(".bin")} == files
        if "model.txt" in files:
            ops = read_ops(str(folder / component))
            assert {n for n in present if n.endswith(".bin")} == set(weight_files(ops, "nhwc")) | set(
                weight_files(ops, "nchw"))


@pytest.mark.parametrize(("repo", "kind", "turbo", "unet", "vae_tiles", "vae"), [
    (SD15, "sd15", False, "unet_fp16", None, "vae_decoder_fp16"),
    (SDXL, "sdxl", False, "sdxl_unet_fp16", "sdxl_vae_decoder_32x32_fp16", "sdxl_vae_decoder_fp16"),
    (TURBO, "sdxl", True, "sdxl_unet_anyshape_fp16", None, "sdxl_vae_decoder_anyshape_fp16"),
])
def test_published_folders_are_recognised(downloaded, repo, kind, turbo, unet, vae_tiles, vae):
    files = OnnxStreamFiles(downloaded[repo])
    info = files.model_info()
    assert (info.kind, info.turbo, files.unet, files.vae_tiles, files.vae) == (kind, turbo, unet, vae_tiles, vae)
    assert info.default_steps == (1 if turbo else 20)
    assert info.latent_multiple == 2  # the tiny UNets have one down-sampling step


def test_tokenizer_gives_the_diffusers_ids(tmp_path):
    """vocab.txt (line = id) + merges.txt from the real CLIP vocabulary tokenise the corpus identically."""
    _tool().write_tokenizer(demo_model_path() / "tokenizer", tmp_path / "tokenizer")
    ours = ClipTokenizer.from_folder(tmp_path / "tokenizer")
    second = ClipTokenizer.from_folder(tmp_path / "tokenizer", pad_token="!")
    corpus = json.loads((ROOT / "tests" / "fixtures" / "tokenizer" / "corpus.json").read_text())["cases"]
    assert len(ours.vocab) == 49408
    for case in corpus:
        assert ours(case["prompt"]) == case["input_ids"], case["prompt"]
        assert second(case["prompt"]) == case["input_ids_2"], case["prompt"]


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255.0**2 / mse))


def _case(kind: str, name: str) -> dict:
    return next(c for c in json.loads((PIPELINES / kind / "cases.json").read_text())["cases"] if c["name"] == name)


def _render(source, kind: str, case: dict, **load) -> np.ndarray:
    pipe = load_pipeline(source, **load)
    noise = np.load(PIPELINES / kind / "noise" / case["noise"])
    image = paint(pipe, case["prompt"], case["negative_prompt"], case["steps"], case["guidance"], case["sampler"],
                          0, case["width"], case["height"], init_noise=noise)
    return np.asarray(image)


def test_sd15_render_matches_the_diffusers_layout(downloaded):
    """The reference is diffusers' own render of the diffusers-layout export (which frame matches at
    ~90 dB in test_equivalence); the OnnxStream folder differs by its fp16 UNet and VAE weights."""
    case = _case("sd15", "euler")
    ours = _render(downloaded[SD15], "sd15", case)
    reference = (np.load(PIPELINES / "sd15" / case["reference"])["image"][0] * 255).round()
    print(f"sd15 OnnxStream layout: {_psnr(ours, reference):.1f} dB vs the diffusers layout's render")
    assert _psnr(ours, reference) > 50


def test_sdxl_turbo_anyshape_render_matches_diffusers(downloaded):
    case = _case("sdxl", "turbo_euler_a_1step")  # 1 step, no guidance, trailing spacing: Turbo's schedule
    ours = _render(downloaded[TURBO], "sdxl", {**case, "steps": None, "guidance": None})  # Turbo's defaults
    reference = (np.load(PIPELINES / "sdxl" / case["reference"])["image"][0] * 255).round()
    print(f"sdxl turbo OnnxStream layout: {_psnr(ours, reference):.1f} dB vs diffusers")
    assert _psnr(ours, reference) > 50


def test_sdxl_base_denoises_like_diffusers_and_decodes_in_32x32_decoder_tiles(downloaded):
    case = _case("sdxl", "euler")
    ref = np.load(PIPELINES / "sdxl" / case["reference"])
    pipe = load_pipeline(downloaded[SDXL], plan=RenderPlan(vae_tile_overlap=2))
    settings = pipe.settings(case["prompt"], case["negative_prompt"], case["steps"], case["guidance"], case["sampler"],
                             0, case["width"], case["height"])
    latents = pipe.denoise_settings(settings, np.load(PIPELINES / "sdxl" / "noise" / case["noise"]))
    scale = float(np.abs(ref["step_latents"][-1]).max())
    np.testing.assert_allclose(latents, ref["step_latents"][-1], atol=5e-3 * scale)
    # the 4x4 "32x32" tile decoder, tiles stepping by 2 as frame's tiled decode with the whole decoder
    assert str(pipe.files.vae_for(8, 12, None)).endswith("sdxl_vae_decoder_32x32_fp16")
    tiled = np.asarray(pipe.decode(latents))
    whole_decoder = load_pipeline(PIPELINES / "sdxl" / "model", plan=RenderPlan(vae_tile=4, vae_tile_overlap=2))
    expected = np.asarray(whole_decoder.decode(latents, tiled=True))
    assert _psnr(tiled, expected) > 50
    # a latent no larger than one tile, or smaller than a tile, goes through the whole-image decoder
    assert str(pipe.files.vae_for(4, 4, None)).endswith("sdxl_vae_decoder_fp16")
    assert str(pipe.files.vae_for(2, 6, None)).endswith("sdxl_vae_decoder_fp16")
    small = np.asarray(pipe.decode(latents[:, :, :2, :6]))
    assert _psnr(small, np.asarray(whole_decoder.decode(latents[:, :, :2, :6], tiled=False))) > 50


def test_render_from_a_url_matches_the_local_folder(downloaded, tmp_path):
    """One UNet pass (1 step, no guidance): every weight file is one range request per pass."""
    server = RangeServer(str(downloaded[SD15].parent)).start()
    try:
        case = {**_case("sd15", "euler"), "steps": 1, "guidance": 1.0, "width": 64, "height": 64,
                "noise": "n64x64.npy"}
        url = server.url(downloaded[SD15].name + "/")
        remote = _render(url, "sd15", case, cache_dir=tmp_path)
        load_pipeline(url, cache_dir=tmp_path).unet_signature()
    finally:
        server.stop()
    np.testing.assert_array_equal(remote, _render(downloaded[SD15], "sd15", case))
    model_txt = [p for p, _ in server.requests if p.endswith("/unet_fp16/model.txt")]
    assert len(model_txt) == 1  # small files are cached; weights are streamed with range requests
    assert any(p.endswith("_nhwc.bin") and r for p, r in server.requests)


def test_incomplete_folders_say_what_is_missing(downloaded, tmp_path):
    folder = Path(shutil.copytree(downloaded[SD15], tmp_path / "sd15"))
    (folder / "tokenizer" / "merges.txt").unlink()
    with pytest.raises(FrameError, match="merges.txt is missing"):
        load_pipeline(folder)
    shutil.rmtree(folder / "unet_fp16")
    with pytest.raises(FrameError, match="without UNet .unet_fp16/model.txt."):
        load_pipeline(folder)


def test_config_check_says_what_the_folder_is(downloaded, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(f"model:\n  source: {downloaded[SD15]}\n")
    out = subprocess.run([sys.executable, "-m", "frame", "config", "check", str(config)], capture_output=True,
                         text=True, check=True).stdout
    assert "OnnxStream SD 1.5 folder" in out
    assert "unet_fp16: float16 weights" in out
    assert "vae_decoder_qu8: uint8 weights + range_data.txt: W8A8" in out and "(present, not used)" in out
    config.write_text(f"model:\n  source: {downloaded[TURBO]}\n")
    out = subprocess.run([sys.executable, "-m", "frame", "config", "check", str(config)], capture_output=True,
                         text=True, check=True).stdout
    assert "OnnxStream SDXL Turbo folder" in out and "sdxl_unet_anyshape_fp16: float16 weights" in out



def test_sd15_folder_with_only_the_uint8_vae_decoder_renders(downloaded, tmp_path):
    """The published SD 1.5 folder may hold vae_decoder_qu8/ instead of vae_decoder_fp16/: the pipeline
    decodes with it (W8A8: uint8 weights, activations on range_data.txt's grids). The fixture's ranges
    come from random latents; here they are calibrated on this render's own latents, as OnnxStream's
    were on real ones, so the picture is a fair W8A8 decode (17 dB with the random-latent ranges)."""
    import onnx

    folder = Path(shutil.copytree(downloaded[SD15], tmp_path / "sd15"))
    shutil.rmtree(folder / "vae_decoder_fp16")
    assert OnnxStreamFiles(folder).vae == "vae_decoder_qu8"
    case = _case("sd15", "euler")
    pipe = load_pipeline(folder)
    settings = pipe.settings(case["prompt"], case["negative_prompt"], case["steps"], case["guidance"], case["sampler"],
                             0, case["width"], case["height"])
    latents = pipe.denoise_settings(settings, np.load(PIPELINES / "sd15" / "noise" / case["noise"]))
    tool, vae = _tool(), onnx.load(str(PIPELINES / "sd15" / "model" / "vae_decoder" / "model.onnx"))
    ranges = tool.calibrate(vae, [{"latent_sample": (latents / np.float32(0.18215)).astype(np.float32)}])
    tool.write_range_data(ranges, folder / "vae_decoder_qu8" / "range_data.txt")
    ours = np.asarray(load_pipeline(folder).decode(latents))  # a new pipeline reads the new ranges
    reference = (np.load(PIPELINES / "sd15" / case["reference"])["image"][0] * 255).round()
    print(f"sd15 OnnxStream layout, W8A8 VAE: {_psnr(ours, reference):.1f} dB vs the diffusers layout's render")
    assert 28 < _psnr(ours, reference) < 60  # 64 dB with the fp16 decoder: the uint8 one really ran
