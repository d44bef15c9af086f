"""Servers the CLI starts on loopback: start, readiness, failure messages, stop."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import httpx
import pytest
from codegym_evaluator import servers
from codegym_evaluator.servers import LoopbackServer, ServerError, free_port, sandbox_server


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_sandbox_server_starts_answers_and_stops() -> None:
    with sandbox_server(workers=1) as server:
        assert server.url.startswith("http://127.0.0.1:")
        r = httpx.post(f"{server.url}/v1/execute", json={"language": "python", "code": "print(6 * 7)"})
        assert r.json()["run"]["stdout"] == "42\n"
    assert not listening(server.port)


def test_a_server_that_dies_while_starting_says_why() -> None:
    argv = [sys.executable, "-c", "import sys; print('cannot load the model'); sys.exit(3)"]
    with pytest.raises(ServerError, match=r"(?s)demo exited with 3 while starting:.*cannot load the model"):
        LoopbackServer("demo", argv, free_port(), "/").start()


def test_a_server_that_never_answers_is_stopped() -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    server = LoopbackServer("silent", argv, free_port(), "/", start_timeout_s=1.0)
    with pytest.raises(ServerError, match="silent did not answer within 1s"):
        server.start()
    assert server._proc is None


def test_llama_cpp_is_set_up_the_first_time_a_command_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Set-up leaves llama.cpp out; the embedded model's server runs the checkout's `scripts/setup llama`,
    announced, and goes on once it is there (here a set-up script that records its call and makes the file
    that stands for the installed server)."""
    installed = tmp_path / "llama_cpp_server"
    setup = tmp_path / "setup"
    setup.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/called\ntouch {installed}\n')
    setup.chmod(0o755)
    monkeypatch.setattr(servers, "llama_installed", installed.exists)
    monkeypatch.delenv("CODEGYM_AUTO_SETUP", raising=False)
    assert not servers.llama_installed()
    servers.ensure_llama(setup)
    assert (tmp_path / "called").read_text().strip() == "llama"
    assert servers.llama_installed()
    assert f"running `{setup} llama`" in capfd.readouterr().err


def test_without_a_checkout_or_with_auto_set_up_off_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = tmp_path / "setup"
    setup.write_text(f"#!/bin/sh\ntouch {tmp_path}/called\n")
    setup.chmod(0o755)
    monkeypatch.setattr(servers, "llama_installed", lambda: False)
    monkeypatch.setenv("CODEGYM_AUTO_SETUP", "0")
    with pytest.raises(servers.ServerError, match=rf"run {setup} llama .*--base-url"):
        servers.ensure_llama(setup)
    assert not (tmp_path / "called").exists()
    monkeypatch.delenv("CODEGYM_AUTO_SETUP")
    monkeypatch.setattr(servers, "checkout_setup", lambda: None)
    with pytest.raises(servers.ServerError, match=r"pip install 'codegym-evaluator\[llama\]'"):
        servers.ensure_llama()


def test_a_failed_set_up_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers, "llama_installed", lambda: False)
    monkeypatch.delenv("CODEGYM_AUTO_SETUP", raising=False)
    with pytest.raises(servers.ServerError, match=r"`/bin/false llama` failed \(exit 1\)"):
        servers.ensure_llama(Path("/bin/false"))


def test_from_this_checkout_the_set_up_script_is_found() -> None:
    """The evaluator runs from the checkout's .venv here (as scripts/setup makes it), so the set-up is found."""
    root = Path(__file__).resolve().parents[3]
    if Path(sys.prefix).resolve() == (root / ".venv").resolve():
        assert servers.checkout_setup() == root / "scripts" / "setup"
    else:
        assert servers.checkout_setup() is None
