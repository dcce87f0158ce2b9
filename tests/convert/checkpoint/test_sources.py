"""Where a checkpoint can come from: a diffusers folder with safetensors weights, and an http(s) URL
(of a single file or of a folder) read with Range requests from a real server on 127.0.0.1 that
drops the connection mid-file."""

from __future__ import annotations

import json
import shutil

import pytest

from frame.convert.checkpoint.plan import Options, detect
from frame.convert.checkpoint.reader import Opener, open_checkpoint
from frame.engine.io.http_settings import HttpSettings
from frame.errors import UsageError
from tests.convert.checkpoint.helpers import FIXTURES, digest, expected, write_safetensors
from tests.engine.http_server import RangeServer

FAST = HttpSettings(timeout=5.0, give_up_seconds=20.0, backoff=0.01, max_backoff=0.05)
FILES = {"unet": "diffusion_pytorch_model", "vae": "diffusion_pytorch_model", "text_encoder": "model",
         "text_encoder_2": "model"}


@pytest.fixture
def server():
    server = RangeServer(str(FIXTURES)).start()
    yield server
    server.stop()


def _digests(found) -> dict:
    return {c.name: {k: digest(v) for k, v in c.weights()} for c in found.components}


def test_url_with_connections_dropped_mid_file(server):
    """The header's requests pass, then a tensor's answer is cut in half, the next connection is
    dropped and the one after answers 500: each read is retried where it stopped, and the weights
    are exactly those of the file on disk."""
    server.faults = [None] * 6 + ["truncate", "drop", "500"] + [None] * 20 + ["truncate"]
    checkpoint = open_checkpoint(server.url("sd15.safetensors"), Opener(FAST))
    try:
        found = detect(checkpoint, Options(config_dir=str(FIXTURES / "sd15")))
        got = _digests(found)
    finally:
        checkpoint.close()
    assert got == expected("sd15")
    assert not server.faults  # every fault was met
    ranges = [r for _, r in server.requests if r]
    assert len(ranges) == len(set(ranges)) + 4  # the four failed ranges were asked again, nothing else


def test_url_of_a_missing_file(server):
    with pytest.raises(Exception, match="404"):
        open_checkpoint(server.url("nothing.safetensors"), Opener(FAST))


def _folder(tmp_path, kind: str, flattened_text: bool):
    """A diffusers folder of the fixture (weights through frame's mapping, configs from the tiny
    folder); ``flattened_text``: CLIPTextModel keys as transformers >= 5.6 saves them."""
    checkpoint = open_checkpoint(str(FIXTURES / f"{kind}.safetensors"))
    found = detect(checkpoint)
    root = tmp_path / kind
    shutil.copytree(FIXTURES / kind, root, ignore=shutil.ignore_patterns("expected.json"))
    for component in found.components:
        weights = dict(component.weights())
        if flattened_text and component.name == "text_encoder":
            weights = {k.removeprefix("text_model."): v for k, v in weights.items()}
        write_safetensors(root / component.name / f"{FILES[component.name]}.safetensors", weights)
    checkpoint.close()
    return root


@pytest.mark.parametrize("kind", ["sd15", "sdxl"])
def test_diffusers_folder(tmp_path, kind):
    root = _folder(tmp_path, kind, flattened_text=kind == "sd15")
    checkpoint = open_checkpoint(str(root))
    found = detect(checkpoint, Options(name=kind))
    assert found.family == {"sd15": "sd1", "sdxl": "sdxl"}[kind]
    assert _digests(found) == expected(kind)
    unet = found.component("unet")
    assert unet.config == json.loads((root / "unet" / "config.json").read_text())


def test_diffusers_folder_over_http(tmp_path):
    root = _folder(tmp_path, "sd15", flattened_text=False)
    server = RangeServer(str(tmp_path)).start()
    try:
        checkpoint = open_checkpoint(server.url("sd15/"), Opener(FAST))
        assert _digests(detect(checkpoint)) == expected("sd15")
        checkpoint.close()
    finally:
        server.stop()
    assert root.is_dir()


def test_onnx_folder_is_sent_to_convert(tmp_path):
    root = tmp_path / "onnx"
    (root / "unet").mkdir(parents=True)
    (root / "model_index.json").write_text(json.dumps({"unet": ["diffusers", "UNet2DConditionModel"]}))
    (root / "unet" / "model.onnx").write_bytes(b"\x08\x07")
    with pytest.raises(UsageError, match="unet/ has no .safetensors weights \\(it is already an ONNX export"):
        open_checkpoint(str(root))


def test_folder_shard_names_stay_inside(tmp_path):
    root = tmp_path / "evil"
    (root / "unet").mkdir(parents=True)
    (root / "model_index.json").write_text(json.dumps({"unet": ["diffusers", "UNet2DConditionModel"]}))
    (root / "unet" / "diffusion_pytorch_model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "../../../etc/passwd"}}))
    with pytest.raises(UsageError, match="a shard name points outside unet/"):
        open_checkpoint(str(root))


def test_url_import_resumes_after_the_network_is_gone(server, tmp_path):
    """The Wi-Fi goes for longer than model.http_give_up_seconds just after the UNet is written: the
    import fails naming the server, DST does not exist, and the same command run again (network back)
    keeps the UNet and reads only the rest."""
    from frame.convert.importer.writer import ImportOptions, import_model
    from frame.engine.errors import WeightFetchError
    from tests.convert.checkpoint import fake_graphs

    checkpoint = open_checkpoint(str(FIXTURES / "sd15.safetensors"))
    builders = fake_graphs.builders(detect(checkpoint, Options(config_dir=str(FIXTURES / "sd15"))))
    checkpoint.close()
    offline = {"now": False, "asked": 0}

    def vae_decoder_when_offline(config):
        offline.update(now=True, asked=len(server.requests))  # the UNet is complete; the VAE's weights are next
        return builders["vae_decoder"](config)

    server.gate = lambda path: "drop" if offline["now"] else None
    url, dst = server.url("sd15.safetensors"), tmp_path / "model"
    options = ImportOptions(weights="fp32", config_dir=str(FIXTURES / "sd15"))
    short = Opener(HttpSettings(timeout=2.0, give_up_seconds=0.5, backoff=0.01, max_backoff=0.05))
    with pytest.raises(WeightFetchError, match="sd15.safetensors"):
        import_model(url, dst, options, {**builders, "vae_decoder": vae_decoder_when_offline}, short)
    assert not dst.exists() and (tmp_path / ".model.import" / "unet" / "model.onnx").is_file()
    offline["now"] = False
    asked = len(server.requests)
    result = import_model(url, dst, options, builders, Opener(FAST))
    assert result.resumed == ["unet"]
    assert (dst / "unet" / "model.onnx").is_file() and not (tmp_path / ".model.import").exists()
    first = {r for _, r in server.requests[:offline["asked"]] if r}  # the header and the UNet
    again = {r for _, r in server.requests[asked:] if r in first}
    assert again and all(r.startswith(("bytes=0-", "bytes=8-")) for r in again)  # the header again, no weight
