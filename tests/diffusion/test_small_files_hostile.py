"""A model server that sends a gzip bomb, an endless body or one byte every half second: the small
files (model_index.json, tokenizer files, OnnxStream's vocab.txt) are refused quickly, in bounded
memory, with a message naming the file and the problem. A real HTTP server on 127.0.0.1."""

from __future__ import annotations

import gzip
import resource
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from frame.diffusion.model_files import ModelFiles
from frame.diffusion.onnxstream_layout import OnnxStreamFiles
from frame.engine.errors import WeightFetchError
from frame.engine.io.http_settings import HttpSettings
from frame.engine.io.small_files import MAX_BYTES

BOMB = gzip.compress(b" " * (128 << 20) + b"{}", compresslevel=6)  # 128 MiB of JSON in ~128 KiB
SETTINGS = HttpSettings(timeout=5.0, give_up_seconds=2.0, backoff=0.05, max_backoff=0.1)


class Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        if self.path.split("/")[1] == "driphead":
            self._send(b"HTTP/1.1 200 OK\r\n")
            for byte in b"X-Slow: " + b"a" * 60 + b"\r\nContent-Length: 2\r\n\r\n":
                self._send(bytes([byte]))
                time.sleep(0.5)
        else:
            self.do_GET()

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        mode = self.path.split("/")[1]
        self.server.seen.append((mode, self.headers.get("Accept-Encoding")))
        if mode == "gzip":
            self._headers({"Content-Encoding": "gzip", "Content-Length": str(len(BOMB))})
            self._send(BOMB)
        elif mode == "big":
            self._headers({"Content-Length": str(MAX_BYTES + 1)})
            self._send_spaces(MAX_BYTES + 1)
        elif mode == "endless":  # no Content-Length: the body ends when the connection closes
            self._headers({"Connection": "close"})
            self._send_spaces(4 * MAX_BYTES)
        elif mode == "drip":
            body = b'{"_class_name": "StableDiffusionPipeline"}'
            self._headers({"Content-Length": str(len(body))})
            for byte in body:
                self._send(bytes([byte]))
                time.sleep(0.5)

    def _headers(self, headers: dict[str, str]) -> None:
        self.send_response(200)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()

    def _send(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            pass  # the client hung up: what it should do

    def _send_spaces(self, count: int) -> None:
        block = b" " * (1 << 20)
        for start in range(0, count, len(block)):
            self._send(block[:count - start])


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass


@pytest.fixture(scope="module")
def hostile():
    server = Server(("127.0.0.1", 0), Hostile)
    server.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def url(server, mode: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/{mode}/"


def _max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_gzip_bomb_is_refused_without_unpacking_it(hostile, tmp_path):
    before = _max_rss_mib()
    with pytest.raises(WeightFetchError, match=r"gzip/model_index.json: the server sent it compressed "
                                               r"\(Content-Encoding: gzip\)"):
        ModelFiles(url(hostile, "gzip"), cache_dir=tmp_path, http=SETTINGS)
    assert _max_rss_mib() - before < 100  # unpacked, it is 128 MiB
    assert ("gzip", "identity") in hostile.seen  # and frame asked for it uncompressed


@pytest.mark.parametrize("mode", ["big", "endless"])
def test_a_file_larger_than_any_small_model_file_is_refused(hostile, tmp_path, mode):
    with pytest.raises(WeightFetchError, match=rf"{mode}/model_index.json: the server (announces|sent more)"):
        ModelFiles(url(hostile, mode), cache_dir=tmp_path, http=SETTINGS)
    assert not list(tmp_path.rglob("model_index.json"))


def test_one_byte_at_a_time_ends_at_the_give_up_deadline(hostile, tmp_path):
    """42 bytes at one per 0.5 s would take 21 s; each read is well within the 5 s timeout."""
    started = time.monotonic()
    with pytest.raises(WeightFetchError, match=r"drip/model_index.json: no complete answer within 2 s "
                                               r"\(model.http_give_up_seconds\)"):
        ModelFiles(url(hostile, "drip"), cache_dir=tmp_path, http=SETTINGS)
    assert time.monotonic() - started < 5


def test_onnxstream_small_files_have_the_same_limits(hostile, tmp_path):
    started = time.monotonic()
    with pytest.raises(WeightFetchError, match=r"tokenizer/vocab.txt: no complete answer within 2 s"):
        OnnxStreamFiles(url(hostile, "drip"), cache_dir=tmp_path, http=SETTINGS)
    assert time.monotonic() - started < 5
    with pytest.raises(WeightFetchError, match=r"compressed"):
        OnnxStreamFiles(url(hostile, "gzip"), cache_dir=tmp_path, http=SETTINGS)


def test_config_checks_probe_ends_when_headers_dribble(hostile):
    """``frame config check``'s probe of a model URL: headers sent one byte per 0.5 s (35 s in all,
    each byte within the 5 s timeout) end the check at its 6 s limit with a warning."""
    from frame.diffusion.url_check import PROBE_TIMEOUT, check_model_url

    started = time.monotonic()
    lines = list(check_model_url(url(hostile, "driphead")))
    assert time.monotonic() - started < PROBE_TIMEOUT + 4
    assert lines and lines[0][0] == "warning" and "did not arrive in time" in lines[0][1]
