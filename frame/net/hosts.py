"""Which ``Host`` headers the daemon answers: its own names and any address, not a stranger's name.

DNS rebinding: a web page on ``evil.example`` makes its name resolve to the frame's LAN address; the
owner's browser then sends that page's requests to the frame with ``Host: evil.example``, and the
same-origin rule lets the page read the answers — the open GET pages and API. Refusing names the frame
does not go by (421 Misdirected Request) ends that: the attacker cannot make the browser send one of
the frame's own names for the attacker's page.

Answered:

* any IP address literal (``192.168.1.20``, ``[::1]``): a page served from an address is the frame's
  own origin, so there is nothing to rebind, and the frame's address may change (DHCP);
* ``localhost`` (and names under ``.localhost``);
* the machine's host name, ``NAME.local`` (mDNS/Avahi, what a Pi answers to) and ``NAME.DOMAIN`` for each
  ``search``/``domain`` of /etc/resolv.conf (``frame.fritz.box``, ``frame.lan``: the router's names);
* the host of ``web.listen`` when it is a name;
* the names in ``web.hosts`` (a reverse proxy's name, a DNS name of your own); ``"*"`` answers any.

A request without ``Host`` (HTTP/1.0 clients) is answered: browsers always send one. The port is not
looked at. Not a first-label match: ``frame.evil.example`` is a name the attacker controls.

``same_origin`` is the other half, for changes: a browser's ``Origin`` must be the frame's own.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

ANY = "*"
RESOLV_CONF = "/etc/resolv.conf"


def same_origin(origin: str | None, host_url: str) -> bool:
    """True when the browser sent no Origin (older browsers, same-origin GET) or our own one: the
    pages' forms and the settings API refuse a change another site's script sends."""
    if origin is None:
        return True
    return origin.rstrip("/") == host_url.rstrip("/")


def _normal(name: str) -> str:
    return name.strip().lower().rstrip(".")


def split_host(header: str) -> str:
    """The host of a ``Host`` header without its port, lower case (``[::1]:80`` → ``::1``)."""
    header = header.strip()
    if header.startswith("["):
        inside, _, rest = header[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else rest
        return inside.lower() if port.isdigit() or not rest else _normal(header)
    if header.count(":") == 1:
        header = header.partition(":")[0]
    return _normal(header)


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.partition("%")[0])  # an IPv6 zone (fe80::1%eth0) is still an address
        return True
    except ValueError:
        return False


def search_domains(path: str = RESOLV_CONF) -> list[str]:
    """The ``search`` and ``domain`` entries of resolv.conf (empty when it cannot be read)."""
    domains: list[str] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as conf:
            for line in conf:
                words = line.split()
                if words and words[0] in ("search", "domain"):
                    domains.extend(_normal(word) for word in words[1:])
    except OSError:
        pass
    return [d for d in domains if d and d != "."]


def machine_names(hostname: str | None = None, domains: Iterable[str] | None = None) -> set[str]:
    """This machine's names: the host name, ``.local`` and each resolver search domain."""
    name = _normal(hostname if hostname is not None else socket.gethostname())
    if not name:
        return set()
    short = name.partition(".")[0]
    names = {name, short, f"{short}.local"}
    names.update(f"{short}.{domain}" for domain in (search_domains() if domains is None else domains))
    return names


class HostPolicy:
    """``allows(host_header)`` for the names of the module docstring."""

    def __init__(self, extra: Iterable[str] = (), listen_host: str = "", names: Iterable[str] | None = None) -> None:
        extra = [_normal(name) for name in extra]
        self.any = ANY in extra
        self.names = set(machine_names() if names is None else names) | {n for n in extra if n != ANY}
        listen = _normal(listen_host.strip("[]"))
        if listen and not is_address(listen):
            self.names.add(listen)

    def allows(self, header: str | None) -> bool:
        if self.any or not header:
            return True
        host = split_host(header)
        return is_address(host) or host == "localhost" or host.endswith(".localhost") or host in self.names

    def refusal(self, header: str) -> str:
        shown = "".join(c if c.isprintable() else "?" for c in header[:100])
        return (f"this frame does not answer to the name {shown!r}: open it by its address or its own name, "
                "or add the name to web.hosts in config.yaml")
