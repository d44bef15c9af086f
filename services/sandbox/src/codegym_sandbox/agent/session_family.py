"""A session's copies (``POST /v1/sessions/{id}/fork``), served by the worker that holds the session.

A ``fork`` frame names the *members* the copies become (the session itself first: its kernel is copied too,
and the copy takes its place, see ``kernel_copy.py``) and the host user each copy's programs are, by its id in
the worker's namespace (0: the session's own). The copies are made (:func:`fork`), and each gets an agent process
of its own, forked from the one that made it, that serves its cells as a session's agent does (``session.py``,
on a :class:`~.kernel_place.CopyPlace`): the copies' cells run side by side, and one copy's cell never waits for
another's. From the first fork on, the worker's agent only passes frames on (:func:`serve`): each frame names
its member, and each answer too. A member's own fork is made by its agent, which hands the new members' agents
(their channels) to the worker's agent with its answer, and then ends, its kernel killed once copied (as the
first one is: ``kernel_copy.end``); the members carry on.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from . import box_protocol, cell_pause, host_users, kernel_copy, session
from .copy_files import Target
from .copy_lineage import Lineage, kept_memory, refusal
from .kernel_copy import Refused
from .kernel_place import CopyPlace
from .protocol import ProtocolError, _read_exact, decode_header, encode_frame, read_frame, wipe, write_all

if TYPE_CHECKING:
    from .box_handle import BoxHandle

_MAX_FDS = 1024  # the most members one fork hands on (the server asks for fewer)
_RELEASE_S = 10.0


def fork(
    kernel: session.Kernel, frame: dict[str, Any], lineage: Lineage, release: Callable[[], None] | None = None
) -> tuple[list[tuple[int, socket.socket, int]], Callable[[], None]]:
    """Copy ``kernel`` for each member the frame names: the members, the sockets to their agents and their
    kernels' pids (the session's own first, which takes the place of ``kernel``), and what starts those agents,
    a process each, to be called once the answer is sent (the answer need not wait for them: what is sent to a
    member waits in its socket). ``release`` is called once the copies are made, before ``kernel`` ends."""
    if (why := refusal(lineage)) is not None:
        raise Refused(why)
    members: list[int] = frame["members"]
    users: list[int] = frame["users"]
    targets, lineages = [], []
    ids = lineage.ids
    runs = host_users.id_runs(lineage.pool)
    try:
        for user in users:
            given = ids.of(user) if user else 0
            if user and given not in lineage.pool:
                raise Refused(f"no host user {user} to give a copy")  # the server's slots and the pool disagree
            inside = given or ids.program
            pool = [x for x in lineage.pool if x != given]
            uid_lines = f"{ids.program} {inside} 1\n" + host_users.lines_less(runs, given)
            gid_lines = f"{ids.program_gid} {inside + ids.gid_shift} 1\n" + host_users.lines_less(
                runs, given, ids.gid_shift
            )
            assert lineage.memory is not None
            if not user:  # the copy that continues the session: bounded with what the session held (kept_memory)
                memory = kept_memory(lineage, int(frame["memory_bytes"]))
            elif (memory := lineage.memory.sibling()) is not None:
                memory.hold_to(int(frame["memory_bytes"]))
            if memory is not None and memory is not lineage.memory and memory.limit is None:
                memory.remove()  # made here, and its limit did not take: it would bound nothing
                raise Refused("a copy's memory limit could not be set")
            meter = lineage.meter.sibling(memory) if lineage.meter is not None else None
            pids = lineage.pids.sibling() if lineage.pids is not None else None
            owner = (inside, inside + ids.gid_shift)
            target = Target(uid_lines, gid_lines, ids.program, ids.program_gid, owner, memory, meter, not user, pids)
            targets.append(target)
            lineages.append(Lineage(pool, lineage.mounts, memory, meter, ids, pids))
        place = kernel.place
        spent = place.used_s()  # the session's CPU time so far: its copies' lives go on from it
        kernel_pid, limit = place.find_kernel(), int(frame["memory_bytes"])
        copies, parent = kernel_copy.copy_kernel(kernel_pid, place.others, targets, lineage.mounts, limit)
        if release is not None:
            release()  # its box no longer takes its run's end for its copies' (see first)
        kernel_copy.end(parent)
    except BaseException:
        for target in targets:
            for group in (target.meter, target.pids, target.memory):
                if group is not None and group is not lineage.memory:  # a member's own, kept
                    group.remove()
        raise
    agents, served = [], []
    for member, copy, own in zip(members, copies, lineages, strict=True):
        place = CopyPlace(copy.pid, own.memory, own.meter, float(frame["cpu_s"]), spent, own.pids)
        copied = session.Kernel(place, copy.requests, copy.stdout, copy.stderr, copy.answers, copied=True)
        # Random state of its own where asked, and where the kernel's own was still to be given it (a copy forked
        # before its first cell): its copies, the continuation among them, share the state it was to leave.
        copied.reseed = kernel.reseed or (bool(frame.get("reseed")) and member != members[0])
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        agents.append((member, ours, copy.pid))
        served.append((member, copied, own, theirs))

    def start() -> None:
        kernel_copy.reap(parent)
        for member, copied, own, theirs in served:
            try:
                _spawn(member, copied, own, theirs)
            except OSError:  # no agent for it (the machine's processes): its kernel ends, and the member with it
                copied.place.end()
            theirs.close()
            copied.close()
            os.close(cast("CopyPlace", copied.place).pidfd)

    return agents, start


def _spawn(member: int, kernel: session.Kernel, lineage: Lineage, theirs: socket.socket) -> None:
    """An agent process for ``member``'s kernel, served on ``theirs``. In a container it is counted with its
    member's processes (its pids cgroup), not with the container's, which holds one session's."""
    agent = os.fork()
    if agent > 0:
        if lineage.pids is not None:
            try:
                lineage.pids.add(agent)
            except OSError:
                os.kill(agent, signal.SIGKILL)
                raise
        return
    if agent == 0:
        code = 1
        try:
            keep = {2, theirs.fileno(), kernel.requests, kernel.stdout, kernel.stderr, kernel.answers.fileno()}
            keep.add(cast("CopyPlace", kernel.place).pidfd)
            for group in (lineage.memory, lineage.meter, lineage.pids):
                keep |= group.descriptors() if group is not None else set()
            for name in os.listdir("/proc/self/fd"):
                if int(name) not in keep:
                    with contextlib.suppress(OSError):
                        os.close(int(name))
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            _serve_member(member, theirs, kernel, lineage)
            code = 0
        finally:
            os._exit(code)


def _serve_member(member: int, sock: socket.socket, kernel: session.Kernel, lineage: Lineage) -> None:
    """One member's agent: its cells, its forks and its end, frame by frame, until the worker's agent hangs up."""
    fd = sock.fileno()
    while True:
        try:
            header, blobs = kernel.later or read_frame(fd)
        except (ProtocolError, OSError):
            break  # the worker's agent is gone
        kernel.later = None
        op = header.get("op")
        if op in cell_pause.OPS:  # for a cell that ended as it was sent: what runs stops again
            kernel.hold(fd)
            continue
        try:
            if op == "cell":
                done, record = kernel.cell(bytes(blobs[0]), float(cast("float", header["wall_s"])), fd)
                write_all(fd, encode_frame({**done, "member": member}, [record]))
                if not done["alive"]:
                    return  # its kernel is gone, and the worker's agent hears of it as this one ends
                kernel.hold(fd)
            elif op == "fork":
                agents, start = fork(kernel, header, lineage)
                forked = {"op": "forked", "members": [a[0] for a in agents], "pids": [a[2] for a in agents]}
                socket.send_fds(sock, [encode_frame({**forked, "member": member})], [a[1].fileno() for a in agents])
                for agent in agents:
                    agent[1].close()
                start()
                return  # its kernel is gone (kernel_copy.py); its copies' agents carry on
            else:
                kernel.place.end()
                # Whether no process of it is left (its cgroup, removed once empty, shows none): its user's slot
                # may then serve another session at once.
                gone = not cast("CopyPlace", kernel.place).members()
                write_all(fd, encode_frame({"op": "ended", "member": member, "gone": gone}))
                return
        except Refused as exc:
            kernel.hold(fd)
            write_all(fd, encode_frame({"op": "error", "error": str(exc), "refused": True, "member": member}))
        except (OSError, ValueError, RuntimeError) as exc:
            write_all(fd, encode_frame({"op": "error", "error": f"{type(exc).__name__}: {exc}", "member": member}))
            kernel.place.end()
            return
        finally:
            for blob in blobs:
                wipe(blob)
    kernel.place.end()


def serve(in_fd: int, out_fd: int, members: dict[int, socket.socket], kernels: dict[int, int], box: int = 0) -> None:
    """The worker's agent once its session has forked: each frame of the server's to the agent of the member it
    names, each answer back, until the server hangs up (its caller then takes the box, and every member, down).
    ``kernels``: each member's kernel, by a pidfd: a member ended while its cell runs is killed at once (its agent
    reads the end only after the cell). ``box``: the box's pid (a child of this process, not a member's agent)."""
    pending: set[int] = set()  # members with a frame sent and no answer yet

    def forget(member: int) -> None:
        """A member's agent is gone (or handed its place on): its pidfd goes with it. Kept, one per copy ever made,
        they would fill this process's descriptor table over a long rollout."""
        if (pidfd := kernels.pop(member, None)) is not None:
            with contextlib.suppress(OSError):
                os.close(pidfd)

    while True:
        by_fd = {s.fileno(): m for m, s in members.items()}
        # poll, not select: no ceiling on the descriptors' numbers (select refuses any past 1023)
        poller = select.poll()
        for fd in (in_fd, *by_fd):
            poller.register(fd, select.POLLIN)
        ready = [fd for fd, _ in poller.poll()]
        _reap(box)
        if in_fd in ready:
            try:
                header, blobs = read_frame(in_fd)
            except ProtocolError:
                return
            member = header.get("member")
            if isinstance(member, int) and member in members:
                if header.get("op") == "end" and member in pending and member in kernels:
                    with contextlib.suppress(OSError):
                        signal.pidfd_send_signal(kernels[member], signal.SIGKILL)
                    forget(member)
                if header.get("op") not in cell_pause.OPS:  # a pause has no answer
                    pending.add(member)
                try:
                    write_all(members[member].fileno(), encode_frame(header, cast("list[bytes]", blobs)))
                except OSError:
                    pass  # its agent ended: answered below, as it is seen gone
            else:
                write_all(out_fd, encode_frame({"op": "error", "error": f"no member {member!r}", "member": member}))
            for blob in blobs:
                wipe(blob)
        for fd in ready:
            if fd == in_fd or fd not in by_fd:
                continue
            member = by_fd[fd]
            frame, fds = _read_member(members[member])
            if frame is None:  # its agent ended: a frame sent to it is answered here
                members.pop(member).close()
                forget(member)
                if member in pending:
                    pending.discard(member)
                    error = {"op": "error", "error": "the session's agent ended", "member": member}
                    write_all(out_fd, encode_frame(error))
                continue
            header = decode_header(frame[4 : 4 + struct.unpack(">I", frame[:4])[0]])
            if header.get("op") == "forked":
                forked = cast("list[int]", header["members"])
                members.pop(member).close()  # its agent ends: the members' own carry on
                forget(member)
                for new, sock_fd, pid in zip(forked, fds, cast("list[int]", header["pids"]), strict=True):
                    if new in members and new != member:  # a member it already has: the answer is not trusted
                        os.close(sock_fd)
                        continue
                    members[new] = socket.socket(fileno=sock_fd)
                    with contextlib.suppress(OSError):
                        kernels[new] = os.pidfd_open(pid)
            else:
                for extra in fds:
                    os.close(extra)
            pending.discard(member)
            write_all(out_fd, frame)


def _reap(box: int) -> None:
    """Take the ends of the members' agents that ended (this process's children, or its orphans': it is their
    reaper), so that none stays a zombie until the family ends. The box is left to its own handle."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            children = [int(pid) for pid in f.read().split()]
    except OSError:
        return
    for pid in children:
        if pid != box:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _read_member(sock: socket.socket) -> tuple[bytes | None, list[int]]:
    """One whole frame from a member's agent, and the descriptors sent with it (with its first bytes)."""
    try:
        head, fds, _, _ = socket.recv_fds(sock, 4, _MAX_FDS)
    except OSError:
        return None, []
    if not head:
        return None, fds
    try:
        head += bytes(_read_exact(sock.fileno(), 4 - len(head)))
        (size,) = struct.unpack(">I", head)
        raw = bytes(_read_exact(sock.fileno(), size))
        sizes = cast("list[int]", decode_header(raw).get("blobs", []))
        body = b"".join(bytes(_read_exact(sock.fileno(), n)) for n in sizes)
    except (ProtocolError, OSError, ValueError):
        for fd in fds:
            os.close(fd)
        return None, []
    return head + raw + body, fds


def _nothing() -> None:
    pass


def first(
    bx: BoxHandle, header: dict[str, Any]
) -> tuple[bytes, dict[int, socket.socket], dict[int, int], Callable[[], None]]:
    """The first fork of the worker's session: the answer, the members' agents (none where it failed), and what
    starts them (called once the answer is sent)."""
    kernel = session.open_kernel()
    if kernel is None:
        return encode_frame({"op": "error", "error": "no session is open on this worker"}), {}, {}, _nothing
    try:
        # Stopped, its box with it, from now on: the box watches its run (the kernel) and ends every process of it
        # when the kernel ends, as the kernel does once copied; its copies are no longer its run's.
        if not kernel.held:
            if not kernel.place.stop():
                raise Refused("the session's processes could not be stopped")
            kernel.held = True
        agents, start = fork(kernel, header, Lineage.of_worker(bx), lambda: _release(bx))
    except Refused as exc:
        return encode_frame({"op": "error", "error": str(exc), "refused": True}), {}, {}, _nothing
    except (OSError, ValueError, RuntimeError) as exc:
        session.drop()  # the kernel may be anywhere now: the session is over
        bx.respawn()
        return encode_frame({"op": "error", "error": f"{type(exc).__name__}: {exc}"}), {}, {}, _nothing
    session.hand_over()  # its kernel is gone: the members' agents carry the session on
    kernels = {}
    for member, _, pid in agents:
        with contextlib.suppress(OSError):
            kernels[member] = os.pidfd_open(pid)
    answer = encode_frame({"op": "forked", "members": [a[0] for a in agents]})
    return answer, {a[0]: a[1] for a in agents}, kernels, start


def _release(bx: BoxHandle) -> None:
    """Have the box let go of its run (the session's kernel, stopped now, and copied): it would take the run's
    end as every one of its processes' (the copies are, of its pid namespace) and watch their memory and CPU time
    as its run's (each has limits of its own). From now on it only reaps what the members leave (it is their
    namespace's init), until the worker ends. Told before it runs again: the message is there as it wakes."""
    assert bx.ctl is not None
    bx.ctl.send(box_protocol.RELEASE)
    os.kill(bx.pid, signal.SIGCONT)
    bx.ctl.settimeout(_RELEASE_S)
    try:
        if bx.ctl.recv(64) != box_protocol.RELEASED:
            raise OSError("the box did not let its run go")
    finally:
        bx.ctl.settimeout(None)
