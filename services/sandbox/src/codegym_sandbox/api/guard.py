"""ASGI middleware in front of every route: bearer token, JSON bodies, body size, per-client concurrency, the bytes
of bodies held at once, request counting.

A request holds its body (and what it is parsed into) until it is answered, however long it waits: for a worker, a
session's turn, a cell. Counted as requests alone, one client's bodies could hold ``MAX_CLIENT_REQUESTS`` x
``MAX_BODY_BYTES`` (16 GiB) of the server's memory, outside every budget. So each request's body is charged
(:func:`held_bytes`: the bytes and the objects parsed from them) against ``max_held`` bytes for the
whole server (503 past it) and, where clients are told apart (``max_client_requests``), a quarter of that for each
client (429 past it), as it arrives and until its answer: a head alone holds nothing (``connections.py`` gives a
body its deadline).

Written as plain ASGI rather than BaseHTTPMiddleware: it sits on the hot path of every run.
"""

from __future__ import annotations

import hmac
import json
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..metrics import Metrics

OPEN_PATHS = frozenset({"/livez", "/readyz", "/metrics", "/v1/ping", "/"})
# The scope key of a request a route of this server makes to it as its caller's (SandboxFusion's ``/submit``:
# ``main._include_datasets``), which no client can set: the route is counted against its caller's requests in
# flight, its relay is not (counted twice, a client's ``max_client_requests`` let half as many through). The relay
# alone was counted once, and a client held hundreds of ``/submit``s, each with its row's tests, waiting for the
# analysis pool before any relay (round 60).
RELAYED = "codegym.relayed"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# What a body holds in the server for each of its bytes, by the width of the widest character in it (Python keeps
# a str at 1, 2 or 4 bytes a character, the widest of its characters, and the JSON reader first decodes the whole
# body to one str): the bytes, that str, the strings parsed from it, and the code's copies on its way to a worker
# (measured: 5.6 times an ASCII body's bytes, 8 to 9 times with one character past U+FFFF in it; it was charged 2).
HELD_FACTORS = {1: 6, 2: 7, 4: 10}
VALUE_BYTES = 32  # and what each value parsed from it holds besides (a number, a list's slot, an empty dict's part)
# A character past U+00FF (2 bytes a character) or past U+FFFF (4), as UTF-8 or as a JSON escape (a surrogate's
# for 4); an escaped backslash before ``u`` over-counts, which is safe.
_WIDE = re.compile(rb"[\xf0-\xf4]|\\u[dD][89abAB]")
_HALF_WIDE = re.compile(rb"[\xc4-\xef]|\\u(?:[1-9a-fA-F]|0[1-9a-fA-F])")


def text_width(part: bytes) -> int:
    """The widest a str parsed from ``part`` may be, in bytes a character (1, 2 or 4)."""
    if part.isascii() and b"\\u" not in part:
        return 1
    return 4 if _WIDE.search(part) else 2 if _HALF_WIDE.search(part) else 1


def held_bytes(part: bytes, width: int = 1) -> int:
    """What a part of a JSON body whose strings are ``width`` bytes a character holds in the server once parsed:
    its bytes times :data:`HELD_FACTORS`, and a value's worth for each place a value may begin (``[``, ``{``,
    ``,``; inside strings too, which it over-counts): ``[{},{},...]`` is some 30 times its bytes as objects."""
    values = part.count(b"[") + part.count(b"{") + part.count(b",")
    return HELD_FACTORS[width] * len(part) + VALUE_BYTES * values


def refusal_status(path: str) -> int:
    """The status of "busy, retry later" on ``path``.

    The native API answers 503 (or 429 for one client's excess). SandboxFusion's clients retry only a
    gateway timeout (verl retries 504 and nothing else), so its routes answer 504: the same Retry-After,
    in the one status they take for "try again".
    """
    return 503 if path.startswith("/v1/") else 504


class Guard:
    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        max_body: int,
        metrics: Metrics,
        max_client_requests: int = 0,
        max_held: int = 1 << 30,
    ) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.max_body = max_body
        self.metrics = metrics
        self.max_client_requests = max_client_requests  # 0: no limit
        self.in_flight: dict[str, int] = {}  # requests being served, by client address
        # Bytes of bodies held, in all and by client; a client's share is never less than one largest ASCII body (a
        # body that holds more than a client's share alone is refused 413).
        self.client_held = max(max_held // 4, HELD_FACTORS[1] * max_body)
        self.max_held = max(max_held, self.client_held)
        self.held: dict[str, int] = {}
        self.held_total = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        route = path if path in ("/run_code", "/v1/execute", "/v1/evaluate") else "other"
        status_seen = 0

        async def counting_send(message: Message) -> None:
            nonlocal status_seen
            if message["type"] == "http.response.start":
                status_seen = message["status"]
            await send(message)

        try:
            if self.token is not None and path not in OPEN_PATHS and not self._authorised(scope):
                await _reply(counting_send, 401, "missing or wrong bearer token", {"www-authenticate": "Bearer"})
                return
            if scope["method"] in BODY_METHODS and not _is_json(_header(scope, b"content-type")):
                # A web page may POST text/plain, a form or a bare body to any host without asking (no CORS
                # preflight), never JSON: a server that takes JSON alone runs nothing a page sends it.
                await _reply(counting_send, 415, "request bodies must be JSON: send Content-Type: application/json")
                return
            if self.max_client_requests and path not in OPEN_PATHS:
                # One client cannot take every worker and the whole queue: its excess waits on its side.
                client = str((scope.get("client") or ("unknown",))[0])
                if scope.get(RELAYED):  # counted as the route that made it; its body is its client's all the same
                    await self._serve(scope, receive, counting_send, client)
                    return
                if self.in_flight.get(client, 0) >= self.max_client_requests:
                    detail = f"more than {self.max_client_requests} requests in flight from {client}"
                    status = 429 if refusal_status(path) == 503 else 504
                    await _reply(counting_send, status, detail, {"retry-after": "1"})
                    return
                self.in_flight[client] = self.in_flight.get(client, 0) + 1
                try:
                    await self._serve(scope, receive, counting_send, client)
                finally:
                    left = self.in_flight.pop(client) - 1
                    if left:
                        self.in_flight[client] = left
                return
            await self._serve(scope, receive, counting_send, None)
        finally:
            self.metrics.requests.labels(route=route, status=str(status_seen)).inc()

    async def _serve(self, scope: Scope, receive: Receive, send: Send, client: str | None) -> None:
        """The body-size checks, then the app. The body is read here, charged as it comes (a head alone holds
        nothing, and a chunked body is charged before it grows further), and handed to the app whole (which
        buffers it anyway; an error raised while its body parser reads would read as a 400)."""
        length = _header(scope, b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _reply(send, 413, f"request body larger than {self.max_body} bytes")
            return
        if scope["method"] not in BODY_METHODS or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)  # no route there reads a body: an open path holds none
            return
        chunks: list[bytes] = []
        size = charged = 0
        width, tail = 1, b""
        try:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away before its body ended
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body:
                    await _reply(send, 413, f"request body larger than {self.max_body} bytes")
                    return
                # Its strings are as wide as its widest character: a wider one makes the bytes before it wider too.
                wider = max(width, text_width(tail + chunk))
                charge = held_bytes(chunk, wider) + (HELD_FACTORS[wider] - HELD_FACTORS[width]) * (size - len(chunk))
                width, tail = wider, chunk[-5:]  # an escape split between two parts is seen whole
                if charged + charge > self.client_held:
                    await _reply(send, 413, "request body holds more, parsed, than one client's share of the server")
                    return
                if refused := self._hold(client, charge, scope["path"]):
                    await _reply(send, *refused)
                    return
                charged += charge
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            body = b"".join(chunks)
            chunks.clear()  # the body once, not twice, for as long as the request lasts
            await self.app(scope, _replay(body, receive), send)
        finally:
            self._release(client, charged)

    def _hold(self, client: str | None, charge: int, path: str) -> tuple[int, str, dict[str, str]] | None:
        """Charge a body to the server's bytes (and its client's); the refusal where it does not fit."""
        if not charge:
            return None
        again = {"retry-after": "1"}
        if self.held_total + charge > self.max_held:
            return refusal_status(path), "the server holds as many request bodies as it may now: retry", again
        if client is not None and self.held.get(client, 0) + charge > self.client_held:
            status = 429 if refusal_status(path) == 503 else 504
            return status, f"the bodies of {client}'s requests in flight hold as much as one client may", again
        self.held_total += charge
        if client is not None:
            self.held[client] = self.held.get(client, 0) + charge
        return None

    def _release(self, client: str | None, charge: int) -> None:
        if not charge:
            return
        self.held_total -= charge
        if client is not None and (left := self.held.pop(client) - charge):
            self.held[client] = left

    def _authorised(self, scope: Scope) -> bool:
        value = _header(scope, b"authorization") or ""
        scheme, _, given = value.partition(" ")
        return scheme.lower() == "bearer" and self.token is not None and hmac.compare_digest(given.encode(), self.token)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the app a body already read, then passes on what the server sends next."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _is_json(content_type: str | None) -> bool:
    """Whether a Content-Type says JSON: ``application/json``, with parameters (``; charset=utf-8``) or not."""
    return content_type is not None and content_type.partition(";")[0].strip().lower() == "application/json"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def _reply(send: Send, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    raw: list[Any] = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
