"""The ComfyUI workflow and answer rules without a network: placeholders, the built-in workflows, an
owner's file (UI format, unknown or missing placeholders), history and queue answers, parameters."""

from __future__ import annotations

import json

import pytest

from frame.diffusion.samplers import sampler_names
from frame.remote import RemoteJob, RemoteUnavailable, comfyui
from frame.remote.a1111 import error_detail

JOB = RemoteJob("a koi pond", "blurry", 20, 6.5, "dpm++2m_karras", 7, 512, 320)


def test_every_frame_sampler_has_a_comfyui_name_and_maps_back():
    assert set(comfyui.SAMPLERS) == set(sampler_names())
    for name in sampler_names():
        workflow = comfyui.fill(comfyui.default_workflow(False), comfyui.job_values(
            RemoteJob("p", "", 5, 7.0, name, 1, 64, 64), "m.safetensors"))
        assert comfyui.parameters_of(workflow, RemoteJob("p", "", 5, 7.0, "euler", 1, 64, 64), "").sampler == name


def test_the_default_workflow_is_filled_with_typed_values():
    sent = comfyui.fill(comfyui.default_workflow(False), comfyui.job_values(JOB, "dreamshaper_8.safetensors"))
    sampler = sent["3"]["inputs"]
    assert (sampler["seed"], sampler["steps"], sampler["cfg"], sampler["sampler_name"], sampler["scheduler"],
            sampler["denoise"]) == (7, 20, 6.5, "dpmpp_2m", "karras", 1.0)
    assert (sent["5"]["inputs"]["width"], sent["5"]["inputs"]["height"]) == (512, 320)
    assert (sent["6"]["inputs"]["text"], sent["7"]["inputs"]["text"]) == ("a koi pond", "blurry")
    assert sent["4"]["inputs"]["ckpt_name"] == "dreamshaper_8.safetensors"
    assert "{{" not in json.dumps(sent)
    assert "{{seed}}" in json.dumps(comfyui.default_workflow(False))  # the template itself is unchanged


def test_img2img_paints_over_the_uploaded_picture():
    job = RemoteJob("p", "", 20, 7.0, "euler_a", 3, 64, 64, init_image=b"png", denoising_strength=0.4)
    sent = comfyui.fill(comfyui.default_workflow(True), comfyui.job_values(job, "m", image_name="frame-1.png"))
    assert "5" not in sent and sent["10"]["inputs"]["image"] == "frame-1.png"
    assert sent["3"]["inputs"]["latent_image"] == ["11", 0] and sent["3"]["inputs"]["denoise"] == 0.4
    assert comfyui.parameters_of(sent, job, "m").denoising_strength == 0.4


def test_a_placeholder_inside_text_is_replaced_as_text():
    workflow = {"1": {"class_type": "CLIPTextEncode", "inputs": {"text": "{{prompt}}, woodcut, seed {{seed}}"}}}
    assert comfyui.fill(workflow, comfyui.job_values(JOB, ""))["1"]["inputs"]["text"] == "a koi pond, woodcut, seed 7"


def test_parameters_come_from_the_workflow_that_was_sent():
    """An owner's workflow that fixes its own steps and sampler: the picture records those, not the job's."""
    sent = {"1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "juggernaut.safetensors"}},
            "2": {"class_type": "KSamplerAdvanced", "inputs": {"noise_seed": 99, "steps": 8, "cfg": 2.0,
                                                               "sampler_name": "dpmpp_sde", "scheduler": "karras"}}}
    params = comfyui.parameters_of(sent, JOB, "other")
    assert (params.steps, params.guidance, params.seed, params.sampler, params.model) == (
        8, 2.0, 99, "dpmpp_sde karras", "juggernaut.safetensors")
    assert (params.prompt, params.negative_prompt, params.width) == ("a koi pond", "blurry", 512)


@pytest.mark.parametrize("data, words", [
    ({"nodes": [], "links": [], "version": 0.4}, "UI format; export it with \"Export (API)\""),
    ([], "not a ComfyUI API-format workflow"),
    ({"3": {"inputs": {}}}, "node '3' has no \"class_type\""),
    ({"3": {"class_type": "CLIPTextEncode", "inputs": {"text": "{{prompt}} {{lora}}"}}},
     "unknown placeholder {{lora}} (known: {{prompt}}, {{negative}}"),
    ({"3": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat"}}}, "has no {{prompt}} placeholder"),
])
def test_a_bad_owner_workflow_is_named(tmp_path, data, words):
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as info:
        comfyui.load_workflow(str(path))
    assert words in str(info.value)


def test_a_missing_or_broken_workflow_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="cannot read .*nowhere.json"):
        comfyui.load_workflow(str(tmp_path / "nowhere.json"))
    (tmp_path / "w.json").write_text("{not json")
    with pytest.raises(ValueError, match="is not JSON"):
        comfyui.load_workflow(str(tmp_path / "w.json"))


def test_checkpoint_lists_old_and_new_forms():
    old = {"CheckpointLoaderSimple": {"input": {"required": {"ckpt_name": [["a.safetensors", "b.ckpt"], {}]}}}}
    new = {"CheckpointLoaderSimple": {"input": {"required": {"ckpt_name": ["COMBO", {"options": ["c.safetensors"]}]}}}}
    assert comfyui.checkpoint_names(old) == ["a.safetensors", "b.ckpt"]
    assert comfyui.checkpoint_names(new) == ["c.safetensors"]
    with pytest.raises(RemoteUnavailable, match="not ComfyUI's"):
        comfyui.checkpoint_names({"detail": "Not Found"})


def test_history_until_done_then_the_first_saved_picture():
    assert comfyui.history_entry({}, "p1") is None
    entry = {"outputs": {"12": {"images": [{"filename": "prev.png", "subfolder": "", "type": "temp"}]},
                         "9": {"images": [{"filename": "frame_00001_.png", "subfolder": "x", "type": "output"}]}},
             "status": {"status_str": "success", "completed": True, "messages": []}}
    assert comfyui.picture_ref(comfyui.history_entry({"p1": entry}, "p1")) == {
        "filename": "frame_00001_.png", "subfolder": "x", "type": "output"}
    with pytest.raises(RemoteUnavailable, match="without a picture"):
        comfyui.picture_ref({"outputs": {}, "status": {"status_str": "success"}})


def test_a_failed_job_says_which_node_failed_and_why():
    entry = {"outputs": {}, "status": {"status_str": "error", "completed": False, "messages": [
        ["execution_start", {"prompt_id": "p1"}],
        ["execution_error", {"node_id": "3", "node_type": "KSampler", "exception_type": "torch.OutOfMemoryError",
                             "exception_message": "CUDA out of memory"}]]}}
    with pytest.raises(RemoteUnavailable) as info:
        comfyui.picture_ref(entry)
    assert info.value.reason == "server-error"
    assert "KSampler (node 3): torch.OutOfMemoryError: CUDA out of memory" in str(info.value)


def test_queue_place():
    queue = {"queue_running": [[4, "a", {}, {}, ["9"]]], "queue_pending": [[7, "c", {}, {}, []], [5, "b", {}, {}, []]]}
    assert [comfyui.queue_place(queue, p) for p in ("a", "b", "c", "z")] == [0, 2, 3, None]


def test_comfyuis_refusal_is_read_as_message_and_details():
    answer = {"error": {"type": "prompt_outputs_failed_validation", "message": "Prompt outputs failed validation",
                        "details": "Value not in list: ckpt_name: 'x.safetensors' not in [...]", "extra_info": {}},
              "node_errors": {}}
    assert error_detail(answer) == ("Prompt outputs failed validation: Value not in list: ckpt_name: "
                                    "'x.safetensors' not in [...]")


def test_comfyuis_refusal_names_the_nodes_when_only_node_errors_hold_the_reason():
    """ComfyUI 0.3.75's answer to an unknown checkpoint: empty details, the reason in node_errors."""
    answer = {"error": {"type": "prompt_outputs_failed_validation", "message": "Prompt outputs failed validation",
                        "details": "", "extra_info": {}},
              "node_errors": {"4": {"errors": [{"type": "value_not_in_list", "message": "Value not in list",
                                                "details": "ckpt_name: 'x.safetensors' not in ['a.safetensors']",
                                                "extra_info": {}}],
                                    "dependent_outputs": ["9"], "class_type": "CheckpointLoaderSimple"}}}
    assert error_detail(answer) == ("Prompt outputs failed validation: CheckpointLoaderSimple (node 4): Value not "
                                    "in list: ckpt_name: 'x.safetensors' not in ['a.safetensors']")
    answer["error"]["details"] = "Required input is missing: images"  # the output's own reason, then the others'
    answer["node_errors"]["9"] = {"errors": [{"message": "Required input is missing", "details": "images"}],
                                  "class_type": "SaveImage"}
    assert error_detail(answer).endswith(": Required input is missing: images; CheckpointLoaderSimple (node 4): "
                                         "Value not in list: ckpt_name: 'x.safetensors' not in ['a.safetensors']")
    assert error_detail({"error": {"message": "m"}, "node_errors": {"1": {"errors": [[{}]] * 10**5}}}) == "m"


def test_a_workflow_without_a_checkpoint_loader_records_no_made_up_model():
    sent = {"1": {"class_type": "UNETLoader", "inputs": {"unet_name": "flux1-schnell.safetensors"}},
            "2": {"class_type": "KSampler", "inputs": {"seed": 5, "steps": 4}}}
    assert comfyui.parameters_of(sent, JOB, "").model == "comfyui"
