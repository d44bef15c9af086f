"""The clients' session handles against real servers in-process: two apps as two servers, each session's
calls pinned to the one that made it; the errors of a session gone or busy."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from codegym_sandbox.client import (
    AsyncSandboxClient,
    SandboxClient,
    SessionBusy,
    SessionGone,
)
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sandbox_support import settings_for

SERVERS = {"a": "alpha", "b": "beta"}  # host of its URL -> its server_id
URLS = [f"http://{host}" for host in SERVERS]


def settings(server_id: str) -> Settings:
    return settings_for("local", server_id=server_id)


class Hosts(httpx.BaseTransport):
    """A blocking transport onto one ``TestClient`` per host, with ``(host, method, path)`` of each request."""

    def __init__(self, apps: dict[str, TestClient]) -> None:
        self.apps, self.seen = apps, list[tuple[str, str, str]]()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((request.url.host, request.method, request.url.path))
        r = self.apps[request.url.host].request(
            request.method, request.url.path, content=request.content, headers={"content-type": "application/json"}
        )
        kept = {k: v for k, v in r.headers.items() if k in ("content-type", "retry-after")}
        return httpx.Response(r.status_code, content=r.content, headers=kept)


class AsyncHosts(httpx.AsyncBaseTransport):
    def __init__(self, apps: dict[str, FastAPI]) -> None:
        self.apps = {host: httpx.ASGITransport(app=app) for host, app in apps.items()}
        self.seen = list[tuple[str, str, str]]()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((request.url.host, request.method, request.url.path))
        return await self.apps[request.url.host].handle_async_request(request)


def pinned(seen: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """Each session call's (host, server_id of the session it named): pinned when they always agree."""
    out = []
    for host, _, path in seen:
        parts = path.split("/")
        if len(parts) > 3 and parts[:3] == ["", "v1", "sessions"]:
            out.append((SERVERS[host], parts[3].split("-", 1)[0]))
    return out


@pytest.fixture(scope="module")
def servers() -> Iterator[Hosts]:
    with TestClient(create_app(settings("alpha"))) as a, TestClient(create_app(settings("beta"))) as b:
        yield Hosts({"a": a, "b": b})


def test_each_session_is_pinned_to_the_server_that_made_it(servers: Hosts) -> None:
    servers.seen.clear()
    with SandboxClient(URLS, transport=servers) as client:
        sessions = [client.session(files={"n.txt": str(i)}) for i in range(4)]
        try:
            # made in turn over both servers, each id naming its server
            assert [s.url for s in sessions] == URLS * 2
            assert [s.session_id.split("-")[0] for s in sessions] == ["alpha", "beta"] * 2
            for s in sessions:
                assert s.execute("n = int(open('n.txt').read())").error is None
            # interleaved: round-robin would send half of these to the server that does not hold them
            for i, s in enumerate(sessions):
                cell = s.execute("print(n); n * 10")
                assert (cell.stdout, cell.display, cell.alive) == (f"{i}\n", str(i * 10), True), cell
                assert s.info().cells == 2
        finally:
            for s in sessions:
                s.close()
    calls = pinned(servers.seen)
    assert len(calls) == 4 * 4 and all(host == named for host, named in calls), calls


def test_a_sessions_copies_are_pinned_to_its_server(servers: Hosts) -> None:
    servers.seen.clear()
    with SandboxClient(URLS, transport=servers) as client:
        client.session().close()  # the next session is made on the second URL
        with client.session() as s:
            s.execute("import random\nrandom.seed(3)\nx = 41")
            copies = s.fork(2)
            try:
                assert [c.url for c in copies] == [s.url] * 2 == [URLS[1]] * 2
                draws = {c.execute("x + 1, random.random()").display for c in (s, *copies)}
                assert len(draws) == 1 and draws.pop().startswith("(42, 0."), draws
                assert len({c.execute("random.random()").display for c in s.fork(2, reseed=True)}) == 2
            finally:
                for c in copies:
                    c.close()
    calls = pinned(servers.seen)
    assert calls and all(host == named for host, named in calls), calls


def test_a_session_ended_while_its_cell_ran_says_the_cell_ran(servers: Hosts) -> None:
    # The cell was sent and ran: a caller told only "gone" would run it again in a fresh interpreter, twice.
    got: list[BaseException] = []
    with SandboxClient(URLS, transport=servers) as client:
        s = client.session(cell_timeout_s=10)

        def run() -> None:
            try:
                s.execute("import time\ntime.sleep(3)")
            except SessionGone as exc:
                got.append(exc)

        cell = threading.Thread(target=run)
        cell.start()
        time.sleep(0.7)
        client.attach(s.session_id, url=s.url).delete()
        cell.join()
    assert len(got) == 1 and isinstance(got[0], SessionGone), got
    assert got[0].status == 410 and got[0].ran, (got[0].status, got[0].detail)


def test_the_async_handle_forks_too() -> None:
    async def go() -> str | None:
        app = create_app(settings("alpha"))
        async with (
            app.router.lifespan_context(app),
            AsyncSandboxClient(URLS[:1], transport=AsyncHosts({"a": app})) as client,
            client.session() as s,
        ):
            await s.execute("y = 7")
            (copy,) = await s.fork()
            display = (await copy.execute("y * 6")).display
            await copy.close()
            return display

    assert asyncio.run(go()) == "42"


def test_leaving_the_block_deletes_the_session_and_a_gone_one_raises(servers: Hosts) -> None:
    with SandboxClient(URLS, transport=servers) as client:
        with client.session(cell_timeout_s=5) as s:
            assert s.execute("x = 1; x").display == "1"
        assert s.closed
        with pytest.raises(SessionGone) as gone:
            s.execute("x")
        assert gone.value.status == 410 and "deleted" in gone.value.detail, gone.value.detail
        assert not gone.value.ran  # the call's cell was never sent
        assert gone.value.session_id == s.session_id and gone.value.url == s.url
        s.close()  # gone already: nothing to do

        with client.session() as t:
            t.delete()  # deleted inside the block: leaving it is no error
        with pytest.raises(SessionGone):
            t.delete()

        # its id on the other server: never made there (404), and the server that holds it is not asked
        with client.session() as u:
            other = URLS[1 - URLS.index(u.url)]
            with pytest.raises(SessionGone) as never:
                client.attach(u.session_id, url=other).execute("1")
            assert never.value.status == 404
            assert u.execute("2 + 2").display == "4"


def test_a_session_made_elsewhere_is_found_by_its_id(servers: Hosts) -> None:
    with SandboxClient(URLS, transport=servers) as maker, maker.session() as made:
        assert made.url == URLS[0]
        made.execute("kept = 'from the maker'")
        with SandboxClient(URLS[::-1], transport=servers) as other:  # asks b first: not there
            found = other.attach(made.session_id)
            assert found.url == made.url and found.execute("kept").display == "'from the maker'"
            with pytest.raises(SessionGone) as nowhere:
                other.attach("alpha-never-made")
            assert nowhere.value.status == 404
        made.delete()
        with SandboxClient(URLS[::-1], transport=servers) as other, pytest.raises(SessionGone) as ended:
            other.attach(made.session_id)
        assert ended.value.status == 410 and ended.value.url == URLS[0]


def test_a_cell_that_cannot_end_the_block_still_deletes(servers: Hosts) -> None:
    with SandboxClient(URLS[:1], transport=servers) as client:
        with pytest.raises(ZeroDivisionError), client.session() as s:
            assert s.execute("1 / 0").error is not None  # a cell's exception is its result, not the client's
            raise ZeroDivisionError
        with pytest.raises(SessionGone):
            s.info()


async def two_async_servers() -> tuple[list[tuple[str, str]], list[object]]:
    apps = {"a": create_app(settings("alpha")), "b": create_app(settings("beta"))}
    async with apps["a"].router.lifespan_context(apps["a"]), apps["b"].router.lifespan_context(apps["b"]):
        transport = AsyncHosts(apps)
        got: list[object] = []
        async with AsyncSandboxClient(URLS, transport=transport, concurrency=4) as client:
            async with client.session() as s, client.session() as t:
                got.append([x.session_id.split("-")[0] for x in (s, t)])
                await asyncio.gather(s.execute("who = 's'"), t.execute("who = 't'"))
                got.append([(await x.execute("who")).display for x in (s, t, t, s)])
                # one cell at a time: a second while the first runs is refused, not queued or sent elsewhere
                slow = asyncio.create_task(s.execute("import time; time.sleep(2)"))
                while not (await s.info()).busy:
                    await asyncio.sleep(0.02)
                with pytest.raises(SessionBusy) as busy:
                    await s.execute("who")
                got.append(busy.value.status)
                got.append((await slow).status)
            with pytest.raises(SessionGone):
                await t.execute("who")
            u = await client.session()  # awaited, not entered: the caller closes it
            got.append((await u.execute("3 * 3")).display)
            again = await client.attach(u.session_id)
            got.append((again.url == u.url, (await again.info()).cells))
            await u.close()
            got.append(u.closed)
        return pinned(transport.seen), got


def test_the_async_client_pins_sessions_too() -> None:
    calls, got = asyncio.run(two_async_servers())
    assert got == [["alpha", "beta"], ["'s'", "'t'", "'t'", "'s'"], 409, "finished", "9", (True, 1), True]
    assert calls and all(host == named for host, named in calls), calls
