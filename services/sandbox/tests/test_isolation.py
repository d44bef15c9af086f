"""What a program can reach from inside the sandbox, and what it leaves behind."""

from __future__ import annotations

import json
import time

import pytest
from codegym_sandbox import languages
from fastapi.testclient import TestClient
from sandbox_support import run_code, stdout


def test_no_network(client: TestClient) -> None:
    code = """
import socket
for addr in (("1.1.1.1", 53), ("127.0.0.1", 22)):
    try:
        socket.create_connection(addr, timeout=1)
        print("connected")
    except OSError:
        print("refused")
try:
    socket.getaddrinfo("example.com", 80)
    print("resolved")
except OSError:
    print("no dns")
"""
    assert stdout(run_code(client, code, run_timeout=8)).splitlines() == ["refused", "refused", "no dns"]


def test_not_root(client: TestClient) -> None:
    out = stdout(run_code(client, "import os; print(os.getuid(), os.geteuid(), os.getgid())")).split()
    assert "0" not in out


def test_private_directories_are_hidden(client: TestClient) -> None:
    """Only toolchains kept on purpose (e.g. /root/.pyenv) show through a hidden directory."""
    kept = {p.split("/")[2] for p in languages.keep_paths() if p.startswith(("/root/", "/home/"))}
    code = """
import json, os
seen = {}
for path in ("/root", "/home"):
    try:
        seen[path] = os.listdir(path)
    except OSError:
        seen[path] = []
seen["bashrc"] = os.path.exists("/root/.bashrc") or os.path.exists("/root/.bash_history")
print(json.dumps(seen))
"""
    seen = json.loads(stdout(run_code(client, code)))
    assert set(seen["/root"]) <= kept and set(seen["/home"]) <= kept
    assert seen["bashrc"] is False


@pytest.mark.parametrize(
    "path", ["/etc/codegym-test", "/var/tmp/codegym-test", "/usr/codegym-test", "/tmp/codegym-test"]
)
def test_cannot_write_outside_the_box(client: TestClient, path: str) -> None:
    code = f"""
try:
    open({path!r}, "w").write("x")
    print("wrote")
except OSError:
    print("refused")
"""
    assert stdout(run_code(client, code)) == "refused\n"


def test_can_write_in_the_box(client: TestClient) -> None:
    code = "import os\nopen('/tmp/box/a', 'w').write('x')\nos.mkdir('d')\nprint(os.getcwd(), sorted(os.listdir('.')))"
    assert stdout(run_code(client, code)) == "/tmp/box ['a', 'd', 'main.py']\n"


def test_files_do_not_leak_between_runs(client: TestClient) -> None:
    # Two workers: enough runs that both have served a run that leaves a file behind.
    for i in range(4):
        run_code(client, f"open('left-behind-{i}', 'w').write('x')\nimport os; os.makedirs('/tmp/box/deep/er')")
    for i in range(4):  # distinct code: a cached answer would prove nothing
        assert stdout(run_code(client, f"import os; print(sorted(os.listdir('.'))) # {i}")) == "['main.py']\n"


def test_daemon_is_gone_after_the_run(client: TestClient) -> None:
    code = """
import os, time
if os.fork() == 0:
    os.setpgid(0, 0)  # not setsid(), which the seccomp filter refuses
    if os.fork() == 0:
        time.sleep(60)
    os._exit(0)
time.sleep(0.2)
print(len([p for p in os.listdir('/proc') if p.isdigit()]))
"""
    assert int(stdout(run_code(client, code))) >= 2  # this program and the daemon (/proc hides the box)
    # Only this program and its supervisors (the box, and in a container the agent as pid 1) remain.
    check = (
        "import os; pids = {int(p) for p in os.listdir('/proc') if p.isdigit()}; "
        "print(pids - {1, os.getppid(), os.getpid()} == set())"
    )
    for i in range(4):
        body = run_code(client, f"{check} # {i}")
        assert stdout(body) == "True\n", body


def test_cannot_kill_the_box(client: TestClient) -> None:
    code = """
import os, signal
for sig in (signal.SIGKILL, signal.SIGTERM):
    try:
        os.kill(1, sig)
        print("sent")
    except OSError as exc:
        print(type(exc).__name__)
print("alive")
"""
    body = run_code(client, code)
    assert body["status"] == "Success" and stdout(body).splitlines()[-1] == "alive"
    for i in range(3):
        assert stdout(run_code(client, f"print('still serving') # {i}")) == "still serving\n"


def test_fork_bomb_is_bounded(client: TestClient) -> None:
    code = """
import os
n = 0
try:
    while True:
        if os.fork() == 0:
            while True:
                pass
        n += 1
except OSError:
    print("stopped at", n)
"""
    started = time.monotonic()
    body = run_code(client, code, run_timeout=2)
    assert time.monotonic() - started < 10
    assert body["status"] == "Failed" or "stopped at" in stdout(body)
    for _ in range(3):
        assert stdout(run_code(client, "print('recovered')")) == "recovered\n"
    assert client.get("/readyz").json()["alive"] == 2


def test_environment_is_clean(client: TestClient) -> None:
    code = "import os\nprint(sorted(k for k in os.environ if 'TOKEN' in k or 'SECRET' in k or 'KEY' in k))"
    assert stdout(run_code(client, code)) == "[]\n"


def test_standard_streams_open_by_path_only_the_way_the_program_holds_them(client: TestClient) -> None:
    """Opened by path, stdin reads and stdout and stderr write, as their descriptors do; nothing else (the
    program could otherwise read back what shares its stdout, a checker's output, or write into its stdin)."""
    code = """
import os
for path, flags in (("/dev/stdin", os.O_WRONLY), ("/dev/stdin", os.O_RDWR), ("/proc/self/fd/1", os.O_RDONLY),
                    ("/dev/stdout", os.O_RDWR), ("/dev/stderr", os.O_RDONLY), ("/dev/fd/2", os.O_RDWR)):
    try:
        os.close(os.open(path, flags | os.O_NONBLOCK))
        print("opened", path, flags)
    except OSError:
        pass
print(open("/dev/stdin").read().strip())
"""
    assert stdout(run_code(client, code, stdin="in")) == "in\n"


def test_device_locks_held_for_workers_without_nodes_of_their_own_carry_nothing() -> None:
    """Where the server is not root, workers bind the host's device nodes, and the zygote holds every kind of
    lock on them (``devices.hold_locks``): whatever a run tries there, it finds them taken, whether
    or not another run tries too; the locks go with the holder."""
    import fcntl
    import os
    import struct
    import subprocess
    import sys

    def seen(path: str) -> list[bool]:
        fd = os.open(path, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                flocked = False
            except BlockingIOError:
                flocked = True
            asked = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)
            posix, ofd = (struct.unpack("hhqqi", fcntl.fcntl(fd, cmd, asked))[0] != fcntl.F_UNLCK for cmd in (5, 36))
            return [flocked, posix, ofd]
        finally:
            os.close(fd)

    before = seen("/dev/null")  # another process of this host may hold one of its own
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom codegym_sandbox.agent import devices\n"
         "held = devices.hold_locks()\nprint(len(held), flush=True)\nsys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and int(holder.stdout.readline()) >= 3
        for path in ("/dev/null", "/dev/zero", "/dev/urandom"):
            assert seen(path) == [True, True, True], path
    finally:
        holder.communicate("")
    assert seen("/dev/null") == before
