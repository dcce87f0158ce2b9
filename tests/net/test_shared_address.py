"""One address, many clients (issue 40 item 12): a phone, a laptop and Home Assistant behind one NAT
address are normal, so the per-address connection guard (``frame.net.connguard``) must queue a new
connection it has no room for, or answer 503 with Retry-After, and never reset one. A real server on
127.0.0.1, 24 client threads from that one address, fresh connections and kept-alive ones."""

from __future__ import annotations

import threading
import time

import pytest
import requests

from frame.net import connguard
from frame.net.server import HttpServer


def _app(environ, start_response):
    time.sleep(0.002)  # a page's work: connections overlap
    body = b"ok " * 64
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


@pytest.fixture
def server():
    http = HttpServer(_app, "127.0.0.1:0", threads=4)
    http.start()
    yield http
    http.close()


def _hammer(port: int, clients: int, requests_each: int, keep_alive: bool) -> tuple[list, list]:
    statuses, failures = [], []
    lock = threading.Lock()

    def client() -> None:
        session = requests.Session() if keep_alive else None
        for _ in range(requests_each):
            try:
                get = session.get if session is not None else requests.get
                answer = get(f"http://127.0.0.1:{port}/api/status", timeout=20)
                with lock:
                    statuses.append((answer.status_code, answer.headers.get("Retry-After")))
            except requests.RequestException as exc:
                with lock:
                    failures.append(repr(exc)[:160])
        if session is not None:
            session.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return statuses, failures


@pytest.mark.parametrize("keep_alive", [False, True], ids=["fresh connections", "kept alive"])
def test_24_clients_from_one_address_are_never_reset(server, keep_alive):
    clients = connguard.PER_ADDRESS + 8
    statuses, failures = _hammer(server.port, clients, 12, keep_alive)
    assert failures == [], f"{len(failures)} of {clients * 12} requests failed, e.g. {failures[:3]}"
    assert len(statuses) == clients * 12
    assert all(status == 200 or (status == 503 and retry) for status, retry in statuses)
    assert sum(status == 200 for status, _ in statuses) >= 0.95 * len(statuses)  # queued, not turned away


def test_past_the_queue_a_client_gets_503_with_retry_after_never_a_reset(server, monkeypatch):
    monkeypatch.setattr(connguard, "QUEUE_PER_ADDRESS", 2)  # a crowd far past what may wait
    statuses, failures = _hammer(server.port, connguard.PER_ADDRESS + 8, 12, keep_alive=False)
    assert failures == [], f"{len(failures)} requests failed, e.g. {failures[:3]}"
    busy = [retry for status, retry in statuses if status == 503]
    assert busy and all(retry == str(connguard.RETRY_AFTER_SECONDS) for retry in busy)
    assert all(status in (200, 503) for status, _ in statuses)
