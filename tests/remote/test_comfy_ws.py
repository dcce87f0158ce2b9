"""ComfyUI's websocket reader on its own: another job's progress is ignored, an oversized frame or a
refused upgrade ends the reader (the job goes on by polling), pings are answered."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

from frame.remote.comfy_ws import MAX_FRAME, ProgressListener
from tests.remote.fake_comfyui import FakeComfyUI


def _listener(fake: FakeComfyUI, prompt_id: str = "mine") -> ProgressListener:
    listener = ProgressListener(fake.url, "client-1", {}, 1.0)
    listener.prompt_id = prompt_id
    listener.start()
    deadline = time.monotonic() + 3
    while "client-1" not in fake.sockets and time.monotonic() < deadline:
        time.sleep(0.02)
    return listener


def _progress(value: int, prompt_id: str) -> bytes:
    return json.dumps({"type": "progress", "data": {"value": value, "max": 20, "prompt_id": prompt_id}}).encode()


def _wait(condition, seconds: float = 15.0) -> bool:
    """Until ``condition`` holds, at most ``seconds``: generous, since a loaded CI machine (two test
    workers beside other jobs) took over 3 s to deliver a frame once; a held condition returns at once."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def test_only_this_jobs_progress_counts():
    with FakeComfyUI() as fake:
        listener = _listener(fake)
        fake.ws_send("client-1", 0x81, _progress(7, "someone-else"))
        fake.ws_send("client-1", 0x82, struct.pack(">II", 1, 1) + b"not a jpeg")  # before any progress: ignored
        fake.ws_send("client-1", 0x81, _progress(3, "mine"))
        assert _wait(lambda: listener.step == 3)
        listener.close()
    assert (listener.step, listener.steps, listener.preview, listener.error) == (3, 20, None, "")


def test_an_oversized_frame_ends_the_reader_with_a_reason():
    with FakeComfyUI() as fake:
        listener = _listener(fake)
        handler = fake.sockets["client-1"]
        with handler.ws_lock:
            handler.wfile.write(bytes([0x82, 127]) + struct.pack(">Q", MAX_FRAME + 1))  # unbuffered
        assert _wait(lambda: bool(listener.error))
        listener.close()
    assert f"a websocket frame of {MAX_FRAME + 1} bytes" in listener.error


def test_a_refused_upgrade_is_only_a_reason_for_the_log():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)

        def answer():
            connection, _ = server.accept()
            connection.recv(4096)
            connection.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            connection.close()

        threading.Thread(target=answer, daemon=True).start()
        listener = ProgressListener(f"http://127.0.0.1:{server.getsockname()[1]}", "c", {}, 1.0).start()
        assert _wait(lambda: bool(listener.error))
        listener.close()
    assert "the websocket was refused (HTTP/1.1 404 Not Found)" in listener.error


def test_a_ping_is_answered_with_a_masked_pong():
    with FakeComfyUI() as fake:
        listener = _listener(fake)
        handler = fake.sockets["client-1"]
        fake.ws_send("client-1", 0x89, b"hi")
        assert _wait(lambda: len(handler.ws_received) >= 8)
        listener.close()
    head, mask, body = handler.ws_received[:2], handler.ws_received[2:6], handler.ws_received[6:8]
    assert head == bytes([0x8A, 0x82]) and bytes(b ^ mask[i] for i, b in enumerate(body)) == b"hi"


def test_hostile_text_frames_are_ignored_or_end_the_reader_with_a_reason():
    with FakeComfyUI() as fake:
        listener = _listener(fake)
        fake.ws_send("client-1", 0x81, b"[1, 2]")  # not an object: AttributeError killed the reader before
        fake.ws_send("client-1", 0x81, _progress(5, "mine"))
        assert _wait(lambda: listener.step == 5)
        fake.ws_send("client-1", 0x81, b"[" * 5_000 + b"]" * 5_000)  # RecursionError before
        assert _wait(lambda: bool(listener.error))
        listener.close()
    assert "nested more than 16 levels deep" in listener.error and listener.step == 5
