"""Which hosts may be monitored (server-side request forgery guard, issue 8): SPECTATOR_ALLOWED_SERVER_HOSTS.

Empty (the default) = any host: the bundled engine is on 127.0.0.1 and most fleets are on private
addresses. Otherwise each entry is an IP address or network (`10.0.0.0/8`, `127.0.0.1`), an exact host
name (`gpu-box.lan`) or a domain with its subdomains (`.gpu.example.org`). A host is allowed when:
1. it is an IP literal inside one of the networks; or
2. it is a name listed (exactly or by domain): the operator vouches for that name; or
3. it is another name and every address it resolves to is inside the networks (so a name that points
   at 169.254.169.254 or 127.0.0.1 is refused unless those networks are listed).
Checked twice: by Server.clean (forms, admin, commands) and on every request a probe or scrape sends
(`AllowlistTransport`), so a row written around the form, or a changed setting, still cannot reach out.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

import httpx
from django.conf import settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class HostNotAllowed(httpx.TransportError):
    """Raised inside the HTTP transport: engine_client reports it as a (non-retried) ProtocolError."""


def _split(entries: Iterable[str]) -> tuple[list[Network], list[str]]:
    networks: list[Network] = []
    names: list[str] = []
    for entry in entries:
        entry = entry.strip().lower()
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            names.append(entry)
    return networks, names


def invalid_entries(entries: Iterable[str]) -> list[str]:
    """Entries that are neither a network nor a plausible host name (for the system check)."""
    networks, names = _split(entries)
    return [n for n in names if not n or "/" in n or ":" in n or " " in n]


def _resolve(host: str) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return []
    return sorted({info[4][0] for info in infos})


def refusal(host: str, allowed: list[str] | None = None) -> str:
    """Why `host` may not be monitored, or "" when it may."""
    allowed = settings.SPECTATOR_ALLOWED_SERVER_HOSTS if allowed is None else allowed
    if not allowed:
        return ""
    host = host.strip("[]").lower().rstrip(".")
    networks, names = _split(allowed)
    why = f"host {host!r} is not in SPECTATOR_ALLOWED_SERVER_HOSTS"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        return "" if any(address in net for net in networks) else why
    if any(host == name or (name.startswith(".") and (host == name[1:] or host.endswith(name))) for name in names):
        return ""
    addresses = _resolve(host)
    if not addresses:
        return f"{why} (and it does not resolve)"
    outside = [a for a in addresses if not any(ipaddress.ip_address(a) in net for net in networks)]
    return f"{why} (it resolves to {', '.join(outside)})" if outside else ""


def url_refusal(url: str) -> str:
    return refusal(urlsplit(url).hostname or "")


class AllowlistTransport(httpx.HTTPTransport):
    """httpx's transport, refusing any request to a host outside the allowlist before connecting."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        why = refusal(request.url.host)
        if why:
            raise HostNotAllowed(why, request=request)
        return super().handle_request(request)
