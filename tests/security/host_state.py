"""Canaries on the host, and the check that an attack left the host as it found it.

A program that escapes its box shows up here: it wrote to a world-writable host file or directory, read a
secret and printed it, connected to a service listening on the host's loopback or on a host unix socket,
or left a process or a file of its uid behind.
"""

from __future__ import annotations

import os
import secrets
import socket
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

# World-writable host places where an escaped program would leave something.
WATCHED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")


class _Listener:
    """A socket on the host that counts who connects to it (nobody from a sandbox should)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.connections = 0
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()


@dataclass
class HostState:
    """What the host looks like before the attacks; :meth:`problems` says what changed."""

    program_uid: int
    secret: str
    canary_file: Path
    canary_dir: Path
    secret_file: Path
    unix_path: Path
    tcp: _Listener
    unix: _Listener
    canary_stat: tuple[int, int, int] = (0, 0, 0)
    owned_before: set[str] = field(default_factory=set)

    @classmethod
    def create(cls, program_uid: int, secret: str) -> HostState:
        tag = secrets.token_hex(4)
        canary_file = Path(f"/var/tmp/codegym-canary-{tag}")
        canary_file.write_text("canary\n")
        canary_file.chmod(0o666)  # only the sandbox's read-only mounts keep a program from writing it
        canary_dir = Path(f"/var/tmp/codegym-canary-dir-{tag}")
        canary_dir.mkdir()
        canary_dir.chmod(0o777)
        home = Path("/root") if os.geteuid() == 0 else Path.home()
        secret_file = home / f".codegym-secret-{tag}"
        secret_file.write_text(secret + "\n")
        secret_file.chmod(0o644)
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", 0))
        unix_path = Path(f"/var/tmp/codegym-canary-{tag}.sock")
        unix_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix_sock.bind(str(unix_path))
        unix_path.chmod(0o777)
        state = cls(
            program_uid, secret, canary_file, canary_dir, secret_file, unix_path, _Listener(tcp), _Listener(unix_sock)
        )
        state.canary_stat = state._canary_stat()
        state.owned_before = state._owned_by_program()
        return state

    @property
    def tcp_port(self) -> int:
        return int(self.tcp.sock.getsockname()[1])

    def _canary_stat(self) -> tuple[int, int, int]:
        st = self.canary_file.stat()
        return st.st_mtime_ns, st.st_size, stat.S_IMODE(st.st_mode)

    def _owned_by_program(self) -> set[str]:
        found = set()
        for top in (*WATCHED_DIRS, str(self.canary_dir)):
            try:
                entries = list(os.scandir(top))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.stat(follow_symlinks=False).st_uid == self.program_uid:
                        found.add(entry.path)
                except OSError:
                    continue
        return found

    def program_processes(self) -> list[int]:
        """Host pids whose real uid is the programs' uid."""
        return self.program_processes_of(self.program_uid)

    @staticmethod
    def program_processes_of(uid: int) -> list[int]:
        """Host pids whose real uid is ``uid``."""
        pids = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/status") as f:
                    for line in f:
                        if line.startswith("Uid:"):
                            if int(line.split()[1]) == uid:
                                pids.append(int(name))
                            break
            except OSError:
                continue
        return pids

    def problems(self) -> list[str]:
        """Everything that differs from the state before the attacks."""
        found = []
        if self.canary_file.read_text() != "canary\n" or self._canary_stat() != self.canary_stat:
            found.append(f"the host canary {self.canary_file} was changed")
        if list(self.canary_dir.iterdir()):
            found.append(f"something was written into the host directory {self.canary_dir}")
        new = self._owned_by_program() - self.owned_before
        if new:
            found.append(f"files of the program's uid appeared on the host: {sorted(new)}")
        if self.tcp.connections:
            found.append(f"{self.tcp.connections} connection(s) reached a host service on loopback")
        if self.unix.connections:
            found.append(f"{self.unix.connections} connection(s) reached a host unix socket")
        if not self.secret_file.exists() or self.secret_file.read_text() != self.secret + "\n":
            found.append("the host secret file was changed")
        return found

    def remove(self) -> None:
        self.tcp.close()
        self.unix.close()
        for path in (self.canary_file, self.secret_file, self.unix_path):
            path.unlink(missing_ok=True)
        for child in self.canary_dir.iterdir():
            child.unlink()
        self.canary_dir.rmdir()
