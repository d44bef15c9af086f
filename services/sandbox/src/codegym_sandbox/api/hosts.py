"""The Host header: a server answers only the host names it is configured for (DNS rebinding).

A web page the machine's browser opens can name its own host and have that name resolve to 127.0.0.1: its
requests then reach a server bound to loopback, with the page's host name in ``Host``. Answering only IP
literals, ``localhost`` and the names configured (``ALLOWED_HOSTS``) refuses them. Bound beyond loopback, a
token is required (``config.py``), which such a page does not have, and the names clients use (a compose
service, a Kubernetes Service, a node's name) are the deployment's: there any Host is answered unless
``ALLOWED_HOSTS`` is set.
"""

from __future__ import annotations

import ipaddress
import json

from starlette.types import ASGIApp, Receive, Scope, Send

from ..config import Settings, is_loopback


def answered_hosts(settings: Settings) -> frozenset[str] | None:
    """The host names (lower case, without port) a server answers besides IP literals; None: every host."""
    names = frozenset(h.lower() for h in settings.allowed_hosts)
    if "*" in names or (not names and not is_loopback(settings.host)):
        return None
    return names | {"localhost"}


class HostCheck:
    """ASGI middleware: 421 for a request whose Host is neither an IP literal nor one of ``names``."""

    def __init__(self, app: ASGIApp, names: frozenset[str] | None) -> None:
        self.app = app
        self.names = names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.names is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
        if host is None or self._answered(_hostname(host)):  # no Host: HTTP/1.0, never a browser
            await self.app(scope, receive, send)
            return
        detail = f"this server does not answer for host {host[:100]!r}: add it to CODEGYM_SANDBOX_ALLOWED_HOSTS"
        body = json.dumps({"detail": detail}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 421, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _answered(self, name: str) -> bool:
        assert self.names is not None
        if name in self.names or name.endswith(".localhost"):  # *.localhost resolves to loopback, never by DNS
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True


def _hostname(host: str) -> str:
    """``host`` without its port and brackets, lower case: ``[::1]:8080`` -> ``::1``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host
