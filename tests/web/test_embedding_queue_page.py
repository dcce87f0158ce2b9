"""The queue page lists the textual-inversion embeddings found (a button per field adds the word), in
the folders and order the render looks them up in, and a picture's details name the LoRAs and
embeddings its prompts used."""

from __future__ import annotations

from pathlib import Path

import pytest

from frame.config import Config, ModelConfig, WebConfig, embedding_names
from frame.diffusion.configured import pipeline_setup
from frame.diffusion.textual_inversion import Embeddings, model_folders
from tests.lora_files import demo_lora
from tests.web.conftest import TOKEN, login, make_app


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")  # listed by name only: nothing reads the bytes
    return path


@pytest.fixture
def folders(tmp_path: Path, state_dir: Path) -> dict[str, Path]:
    """A model folder with embeddings inside it, beside it (one shadowed, one in a subfolder) and in
    the state folder, plus files that are not embeddings."""
    model = tmp_path / "models" / "sd15"
    model.mkdir(parents=True)
    return {
        "model": model,
        "inkwash": _touch(model / "embeddings" / "inkwash.pt"),
        "shadowed": _touch(tmp_path / "models" / "embeddings" / "inkwash.safetensors"),
        "BadHands": _touch(tmp_path / "models" / "embeddings" / "negatives" / "BadHands.safetensors"),
        "easynegative": _touch(state_dir / "embeddings" / "easynegative.bin"),
        "notes": _touch(state_dir / "embeddings" / "readme.txt"),
        "lora": demo_lora(_touch(state_dir / "loras" / "woodcut.safetensors")),  # listed: a LoRA's header
    }


@pytest.fixture
def config(folders, state_dir) -> Config:
    return Config(state_dir=str(state_dir), web=WebConfig(token=TOKEN), model=ModelConfig(source=str(folders["model"])))


@pytest.fixture
def owner_client(store, state_dir, pictures, config):
    client = make_app(store, state_dir, config=config).test_client()
    assert login(client).status_code == 303
    return client


def test_queue_page_lists_embeddings_for_prompt_and_negative(owner_client):
    page = owner_client.get("/queue").get_data(as_text=True)
    for name in ("BadHands", "easynegative", "inkwash"):
        assert f'data-embedding="{name}" data-into="prompt"' in page
        assert f'data-embedding="{name}" data-into="negative_prompt"' in page
    assert "readme" not in page and 'data-lora-tag="&lt;lora:woodcut:1&gt;"' in page
    positions = [page.index(f'data-embedding="{name}" data-into="prompt"') for name in ("BadHands", "easynegative",
                                                                                       "inkwash")]
    assert positions == sorted(positions)  # by name, whatever the case
    assert 'aria-describedby="embeddings-negative-help"' in page  # each button says which field it fills


def test_page_lists_the_files_the_render_reads(folders, config):
    """One folder rule: the page's folders are the render's (model folder, beside it, state folder,
    ``~`` expanded), and the name found first is the file the render reads."""
    setup = pipeline_setup(config)
    render_folders = model_folders(setup.source) + [Path(setup.embeddings_dir)]
    assert embedding_names.configured_folders(config) == render_folders
    found = embedding_names.available(embedding_names.configured_folders(config))
    assert found == Embeddings(render_folders).files()
    assert found["inkwash"] == folders["inkwash"]  # inside the model folder wins over beside it
    assert set(found) == {"inkwash", "BadHands", "easynegative"}


def test_render_expands_the_state_folder_of_embeddings(tmp_path, monkeypatch):
    """``state_dir: ~/...`` (the default's form): the render looked in a folder literally named ``~``."""
    monkeypatch.setenv("HOME", str(tmp_path))
    setup = pipeline_setup(Config(state_dir="~/state"))
    assert setup.embeddings_dir == str(tmp_path / "state" / "embeddings")


def test_edit_page_lists_embeddings_too(owner_client, store):
    prompt_id = store.queue_prompt("a barn at dusk")
    page = owner_client.get(f"/queue/{prompt_id}/edit").get_data(as_text=True)
    assert 'data-embedding="inkwash" data-into="negative_prompt"' in page


def test_picture_details_name_loras_and_embeddings(owner_client, store):
    picture = store.add_picture(file="new.png", prompt="a harbour, (inkwash:1.2) <lora:woodcut:0.5>, inkwashed sky",
                                negative_prompt="easynegative, badhands, blurry", seed=3)
    page = owner_client.get(f"/pictures/{picture}").get_data(as_text=True)
    assert "<dt>LoRAs</dt><dd>&lt;lora:woodcut:0.5&gt;</dd>" in page
    assert "<dt>embeddings</dt><dd>inkwash</dd>" in page  # "inkwashed" is another word
    assert "<dt>negative embeddings</dt><dd>easynegative, BadHands</dd>" in page  # any case, as the tokenizer


def test_named_in_takes_the_longer_name_first():
    assert embedding_names.named_in("easynegative, easy", ["easy", "easynegative"]) == ["easynegative", "easy"]
    assert embedding_names.named_in("ink_wash2 <x>", ["ink"]) == ["ink"]
    assert embedding_names.named_in("", ["ink"]) == []
