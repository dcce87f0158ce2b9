"""The addresses a page served on ``web.listen`` is opened at, for the line that tells the owner.

The daemon once logged ``API listening on http://0.0.0.0:8080/api/status``: a bind address no browser
opens, and the JSON API rather than the page. ``page_urls`` gives the URLs that work: on this computer
first, then (for a wildcard bind) the machine's mDNS name and its LAN address, which a phone on the same
network opens. The LAN address is the one the system would route through (a UDP socket is pointed at a
private address; ``connect`` on UDP sends nothing), so no network traffic is made.
"""

from __future__ import annotations

import socket

from frame.net.server import split_listen

_WILDCARDS = ("", "0.0.0.0", "::")


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def lan_address() -> str | None:
    """This machine's address on its network, or None (no route: a laptop without Wi-Fi)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.254.254.254", 9))  # UDP: picks the route, sends nothing
            address = probe.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith(("127.", "0.")) else address


def page_urls(listen: str, port: int | None = None, path: str = "/") -> list[str]:
    """The URLs of ``path`` served on ``listen`` (``port``: the one really bound, for ``:0``): this
    computer's first, then for a wildcard bind ``NAME.local`` and the LAN address."""
    host, configured = split_listen(listen)
    port = configured if port is None else port
    if host not in _WILDCARDS:
        return [f"http://{_bracket(host)}:{port}{path}"]
    urls = [f"http://{'[::1]' if host == '::' else '127.0.0.1'}:{port}{path}"]
    name = socket.gethostname().split(".")[0]
    if name and name != "localhost":
        urls.append(f"http://{name}.local:{port}{path}")
    address = lan_address()
    if address:
        urls.append(f"http://{address}:{port}{path}")
    return urls
