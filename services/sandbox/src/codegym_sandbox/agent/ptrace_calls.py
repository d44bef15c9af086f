"""System calls made in another process, by its tracer: what copies a session's kernel (``kernel_copy.py``).

The agent traces a process only while it copies a kernel. The process is stopped in a system call (a kernel
waits for its next cell in ``read``), so there is a ``syscall`` instruction just before where it stopped: the
agent points the process at it with the call's number and arguments in its registers, lets it run to the
call's end (``PTRACE_SYSCALL`` twice), reads the result, and puts the registers back. A call it was stopped in
(``read``, interrupted by the stop: ``-ERESTARTSYS``) is made again when it goes on, as the kernel's own
restart would. Calls that need no answer between them are made as one small program written into memory of the
process's own (:meth:`Tracee.run`): a stop for them all, not two for each (a fork into 16 makes some 500).
Only x86_64's registers and code are known here (:data:`SUPPORTED`): elsewhere a kernel is not copied.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import struct
import time
from collections.abc import Callable, Sequence

from .process_memory import read_memory, write_memory

SUPPORTED = platform.machine() == "x86_64"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]

_CONT, _GETREGS, _SETREGS, _DETACH, _SYSCALL, _SETOPTIONS, _GETEVENTMSG, _SEIZE, _INTERRUPT = (
    7, 12, 13, 17, 24, 0x4200, 0x4201, 0x4206, 0x4207)  # fmt: skip
_GET_RSEQ_CONFIGURATION = 0x420F
_TRAP_FLAG = 0x100  # eflags' single-step bit
_O_TRACESYSGOOD, _O_TRACEFORK, _O_TRACESECCOMP, _O_EXITKILL = 1, 2, 0x80, 0x100000
EVENT_FORK, EVENT_SECCOMP, EVENT_STOP = 1, 7, 128
_SYSCALL_STOP = 0x80 | 5  # SIGTRAP | 0x80: a stop at a system call's entry or exit (TRACESYSGOOD)
_WALL = 0x40000000
_SIGTRAP = 5
_SIGSTOP = 19
_NONE = (1 << 64) - 1  # orig_rax of a process not in a system call
# -ERESTARTSYS, -ERESTARTNOINTR, -ERESTARTNOHAND, -ERESTART_RESTARTBLOCK: a call to be made again
_RESTARTS = {512, 513, 514, 516}
_ENOSYS = 38  # what a call's register holds at its entry
_REACH = 400  # stops (a call's entry or exit each) a process may take to come to the wait it is copied in
_REACH_S = 0.5  # and the time it may take
_STOP_S = 1.0  # the time a process interrupted may take to stop

NR = {
    "read": 0, "close": 3, "mmap": 9, "munmap": 11, "socketpair": 53, "clone": 56, "fcntl": 72, "chdir": 80,
    "setsid": 112, "openat": 257, "pipe2": 293, "wait4": 61, "mincore": 27,
    "setresuid": 117, "setresgid": 119, "capset": 126, "prctl": 157, "restart_syscall": 219, "dup3": 292,
    "close_range": 436, "mount": 165, "prlimit64": 302,
}  # fmt: skip
_FIELDS = "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base"
_FIELDS += " ds es fs gs"


# x86_64: movabs of a 64-bit value into rax, and into the argument registers in order (rdi rsi rdx r10 r8 r9);
# movabs of rax to an address, and from one; mov of rax into each argument register; syscall; int3.
_MOV_RAX, _STORE_RAX, _LOAD_RAX, _SYSCALL_OP, _TRAP = b"\x48\xb8", b"\x48\xa3", b"\x48\xa1", b"\x0f\x05", b"\xcc"
_MOV_ARGS = (b"\x48\xbf", b"\x48\xbe", b"\x48\xba", b"\x49\xba", b"\x49\xb8", b"\x49\xb9")
_FROM_RAX = (b"\x48\x89\xc7", b"\x48\x89\xc6", b"\x48\x89\xc2", b"\x49\x89\xc2", b"\x49\x89\xc0", b"\x49\x89\xc1")


class Earlier(int):
    """An argument that is the result of an earlier call of the same program (its place): a descriptor it opened."""


Call = tuple[str, Sequence[int]]


class Running:
    """A program started in a traced process (:meth:`Tracee.start`), to its trap at ``end``."""

    def __init__(self, pid: int, end: int, results: int, count: int) -> None:
        self.pid, self.end, self.results, self.count = pid, end, results, count

    def finish(self, on_event: Callable[[int], None] | None = None) -> list[int]:
        """Wait for the program's end: the results of its calls."""
        while True:
            sig, event = wait_stop(self.pid)
            if event == EVENT_SECCOMP or (event and on_event is not None):
                if event != EVENT_SECCOMP and on_event is not None:
                    on_event(event)
                _ptrace(_CONT, self.pid)
                continue
            # Its own trap, just past the program's last byte: done (the signal is not passed on as it goes on).
            # Any other stop is a signal from elsewhere (a SIGTRAP a file lease sends looks the same, but stops
            # anywhere): the program did not run as written.
            if sig == _SIGTRAP and not event and _registers(self.pid).rip == self.end:
                return list(struct.unpack(f"<{self.count}q", read_memory(self.pid, self.results, 8 * self.count)))
            raise TraceFailed(0, f"process {self.pid} stopped (signal {sig}, event {event}) in a program")


def program(calls: Sequence[Call], results: int) -> bytes:
    """Code that makes ``calls`` (each a name and its arguments) one after another, stores each one's result at
    ``results`` + 8 x its place, and then traps."""
    code = bytearray()
    for i, (name, args) in enumerate(calls):
        for op, move, value in zip(_MOV_ARGS, _FROM_RAX, args, strict=False):
            if isinstance(value, Earlier):
                assert 0 <= value < i
                code += _LOAD_RAX + struct.pack("<Q", results + 8 * value) + move
            else:
                code += op + struct.pack("<Q", value & _NONE)
        code += _MOV_RAX + struct.pack("<Q", NR[name])
        code += _SYSCALL_OP + _STORE_RAX + struct.pack("<Q", results + 8 * i)
    return bytes(code + _TRAP)


class Regs(ctypes.Structure):
    _fields_ = [(name, ctypes.c_ulonglong) for name in _FIELDS.split()]


class _RseqConfiguration(ctypes.Structure):
    _fields_ = [
        ("rseq_abi_pointer", ctypes.c_uint64),
        ("rseq_abi_size", ctypes.c_uint32),
        ("signature", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
    ]


class TraceFailed(OSError):
    """The traced process could not be made to do what was asked: it ended, or stopped where it may not."""


def _ptrace(request: int, pid: int, addr: int = 0, data: int | ctypes.c_void_p = 0) -> int:
    ctypes.set_errno(0)
    arg = data if isinstance(data, ctypes.c_void_p) else ctypes.c_void_p(data)
    result = int(_libc.ptrace(request, pid, ctypes.c_void_p(addr), arg))
    if result == -1 and (err := ctypes.get_errno()):
        raise TraceFailed(err, f"ptrace {request} of {pid}: {os.strerror(err)}")
    return result


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _registers(pid: int) -> Regs:
    regs = Regs()
    _ptrace(_GETREGS, pid, 0, ctypes.cast(ctypes.byref(regs), ctypes.c_void_p))
    return regs


def _set_registers(pid: int, regs: Regs) -> None:
    _ptrace(_SETREGS, pid, 0, ctypes.cast(ctypes.byref(regs), ctypes.c_void_p))


def wait_stop(pid: int) -> tuple[int, int]:
    """The signal and ptrace event of ``pid``'s next stop."""
    _, status = os.waitpid(pid, _WALL)
    if not os.WIFSTOPPED(status):
        raise TraceFailed(0, f"process {pid} ended while traced")
    return os.WSTOPSIG(status), status >> 16


def _stop_by(pid: int, deadline: float) -> tuple[int, int] | None:
    """``pid``'s next stop (as :func:`wait_stop`), or None where it has not stopped by ``deadline``: it is then
    stopped (interrupted) all the same."""
    stopped = _stop_within(pid, deadline)
    if stopped is None:
        _interrupt(pid)
    return stopped


def _stop_within(pid: int, deadline: float) -> tuple[int, int] | None:
    """``pid``'s next stop (as :func:`wait_stop`), or None where it has not stopped by ``deadline``."""
    pause = 0.0
    while True:
        got, status = os.waitpid(pid, _WALL | os.WNOHANG)
        if got:
            if not os.WIFSTOPPED(status):
                raise TraceFailed(0, f"process {pid} ended while traced")
            return os.WSTOPSIG(status), status >> 16
        if time.monotonic() > deadline:
            return None
        time.sleep(pause)
        pause = min(0.001, pause + 0.0001)


def _interrupt(pid: int) -> None:
    """Stop ``pid``, traced and running. One that does not stop within :data:`_STOP_S` is killed, its end taken,
    and :class:`TraceFailed` raised: no interrupt stops a process that waits in a vfork for its child (one that
    never execs, blocked opening a fifo), and one that can be neither held nor let go (a process is let go
    stopped) would hold its tracer's wait, a worker's slot and its session's lock for good."""
    _ptrace(_INTERRUPT, pid)
    if _stop_within(pid, time.monotonic() + _STOP_S) is not None:
        return
    with contextlib.suppress(OSError):
        os.kill(pid, 9)
        _stop_within(pid, time.monotonic() + _STOP_S)  # its end, told to its tracer first, taken
    raise TraceFailed(0, f"process {pid} would not stop (it waits for a process of its own): it was ended")


def _forked(pid: int) -> int:
    """The process ``pid`` made, at its fork's event stop (its pid as this process sees it)."""
    message = ctypes.c_ulong()
    _ptrace(_GETEVENTMSG, pid, 0, ctypes.cast(ctypes.byref(message), ctypes.c_void_p))
    return int(message.value)


def _let_go(pid: int) -> None:
    """Let the process ``pid`` made (traced from its start, as a fork of a tracee is) go on untraced."""
    child = _forked(pid)
    with contextlib.suppress(OSError):
        wait_stop(child)
        _ptrace(_DETACH, child, 0, 0)


class Tracee:
    """A process stopped under this tracer in a system call, and where it stopped (:attr:`saved`)."""

    def __init__(self, pid: int, saved: Regs | None = None) -> None:
        self.pid = pid
        self.saved = saved if saved is not None else self.registers()
        if self.saved.orig_rax == _NONE:
            raise TraceFailed(0, f"process {pid} is not stopped in a system call")
        self.at = self.saved.rip - 2
        if read_memory(pid, self.at, 2) != b"\x0f\x05":
            raise TraceFailed(0, f"process {pid} stopped past no syscall instruction")

    @classmethod
    def clone_of(cls, parent: Tracee, pid: int) -> Tracee:
        """A clone ``parent`` made in a system call (its fork event's), to be seen stopped (:meth:`started`)."""
        tracee = cls.__new__(cls)
        tracee.pid, tracee.saved, tracee.at = pid, parent.saved, parent.at
        return tracee

    def started(self) -> None:
        """Wait for a clone to stop before its first instruction, in its parent's call (:meth:`clone_of`)."""
        wait_stop(self.pid)
        if read_memory(self.pid, self.at, 2) != b"\x0f\x05":
            raise TraceFailed(0, f"process {self.pid} stopped past no syscall instruction")

    @classmethod
    def seize(cls, pid: int, waiting: Callable[[Regs], bool]) -> Tracee:
        """Trace ``pid`` (its forks too, and its calls the filter sends to a tracer) and stop it in the call
        ``waiting`` tells (one it was making, or the next it makes, within :data:`_REACH` calls)."""
        options = _O_TRACESYSGOOD | _O_TRACEFORK | _O_TRACESECCOMP | _O_EXITKILL
        _ptrace(_SEIZE, pid, 0, options)
        _interrupt(pid)
        regs = _registers(pid)
        if regs.orig_rax != _NONE and waiting(regs):
            return cls._held(pid, regs)
        # It was between calls (it had not reached its wait yet): on to its next ones, for a while. A cell may have
        # answered for itself (its answer is in its reach) and gone on running: code that makes no call would
        # never stop here.
        deadline = time.monotonic() + _REACH_S
        for _ in range(_REACH):
            _ptrace(_SYSCALL, pid)
            stopped = _stop_by(pid, deadline)
            if stopped is None:
                break
            sig, event = stopped
            regs = _registers(pid)
            if event == EVENT_FORK:  # a process it made meanwhile: its own, let go (the fork is then refused)
                _let_go(pid)
            elif event == EVENT_SECCOMP:  # a call only its tracer may let through: not this one
                regs.orig_rax = _NONE
                _set_registers(pid, regs)
            elif sig == _SYSCALL_STOP and _signed(regs.rax) == -_ENOSYS and waiting(regs):
                # At the entry of the call it waits in: made as though it had been interrupted there.
                entry = Regs.from_buffer_copy(regs)
                regs.orig_rax = _NONE  # not made now
                _set_registers(pid, regs)
                _ptrace(_SYSCALL, pid)
                wait_stop(pid)
                entry.rax = (-512) & _NONE  # -ERESTARTSYS: made again once it goes on (see release)
                return cls._held(pid, entry)
        with contextlib.suppress(OSError):
            _ptrace(_DETACH, pid, 0, _SIGSTOP)  # left stopped, as it was held
        raise TraceFailed(0, f"process {pid} did not come to its wait")

    @classmethod
    def _held(cls, pid: int, regs: Regs) -> Tracee:
        """The process, stopped in its wait and held; or, where it cannot be, let go (stopped, as it was held)
        before the failure is told: a process left traced would wait for this one to take its end."""
        try:
            return cls(pid, regs)._steered_by_nothing()
        except TraceFailed:
            with contextlib.suppress(OSError):
                _ptrace(_DETACH, pid, 0, _SIGSTOP)
            raise

    def _steered_by_nothing(self) -> Tracee:
        """Take from the process what would run code of its own instead of the agent's as it goes on: a restartable
        sequence armed in its rseq area (on a return to user space inside it, the kernel sends it to the program's
        abort handler). Cleared where the kernel reads it (the area's ``rseq_cs``), as the kernel clears it itself
        once outside: nothing of the program's own is lost (it is stopped in a system call, in no sequence). Its
        copies inherit it cleared. A single-step flag is dropped from the registers of each call (see ``_set``);
        a filter of its own, or syscall user dispatch, no program may set (linux.py)."""
        conf = _RseqConfiguration()
        try:
            size = ctypes.sizeof(conf)
            _ptrace(_GET_RSEQ_CONFIGURATION, self.pid, size, ctypes.cast(ctypes.byref(conf), ctypes.c_void_p))
        except TraceFailed as exc:  # no such request (Linux before 5.13): where its rseq area is, no one can say
            raise TraceFailed(exc.errno, "copying a session needs Linux 5.13 or newer (restartable sequences)") from exc
        if conf.rseq_abi_pointer:
            write_memory(self.pid, conf.rseq_abi_pointer + 8, bytes(8))
        return self

    def registers(self) -> Regs:
        return _registers(self.pid)

    def _set(self, regs: Regs) -> None:
        regs.eflags &= ~_TRAP_FLAG & _NONE  # no single step: a trap after each instruction would end a program
        _set_registers(self.pid, regs)

    def call(self, name: str, *args: int, on_event: Callable[[int], None] | None = None) -> int:
        """Make the process call ``name(*args)``; its result (a negative errno on failure)."""
        self.begin_call(name, *args)
        return self.end_call(on_event)

    def begin_call(self, name: str, *args: int) -> None:
        """Start :meth:`call`: the process goes on to the call's entry, while this one does something else (the
        same call in other processes: :func:`call_each`), until :meth:`end_call`."""
        regs = Regs.from_buffer_copy(self.saved)
        regs.rip, regs.rax, regs.orig_rax = self.at, NR[name], _NONE
        for field, value in zip(("rdi", "rsi", "rdx", "r10", "r8", "r9"), args, strict=False):
            setattr(regs, field, value & _NONE)
        self._set(regs)
        _ptrace(_SYSCALL, self.pid)

    def end_call(self, on_event: Callable[[int], None] | None = None) -> int:
        """The call :meth:`begin_call` started, to its entry and then to its exit; the events on the way (a
        fork's) are told: its result."""
        for entry in (True, False):
            while True:
                sig, event = wait_stop(self.pid)
                if sig == _SYSCALL_STOP:
                    break
                # A signal (of its copies' ends, SIGCHLD; one a file lease sends) is not passed on: the call is
                # made as asked all the same (nothing of the program's can send it elsewhere, _steered_by_nothing).
                if event and on_event is not None:
                    on_event(event)
                _ptrace(_SYSCALL, self.pid)
            if entry:
                _ptrace(_SYSCALL, self.pid)
        return _signed(self.registers().rax)

    def run(
        self,
        code: int,
        results: int,
        calls: Sequence[Call],
        data: bytes = b"",
        at: int = 0,
        on_event: Callable[[int], None] | None = None,
    ) -> list[int]:
        """Make the process run ``calls`` as one program, written at ``code`` (executable memory of its own, with
        ``data`` written at ``at`` first, and room for a result each at ``results``): their results, a negative
        errno for each that failed. A call the filter sends to a tracer is let through (they are this tracer's);
        other events (a fork's) are told to ``on_event``."""
        return self.start(code, results, calls, data, at).finish(on_event)

    def start(self, code: int, results: int, calls: Sequence[Call], data: bytes = b"", at: int = 0) -> Running:
        """Start ``calls`` as one program (see :meth:`run`), to be finished (:meth:`Running.finish`): processes
        started one after another then run at once."""
        if data:
            write_memory(self.pid, at, data)
        code_bytes = program(calls, results)
        write_memory(self.pid, results, bytes(8 * len(calls)))  # nothing an earlier program left is read as a result
        write_memory(self.pid, code, code_bytes)
        regs = Regs.from_buffer_copy(self.saved)
        regs.rip, regs.orig_rax = code, _NONE
        self._set(regs)
        _ptrace(_CONT, self.pid)
        return Running(self.pid, code + len(code_bytes), results, len(calls))

    def checked(self, name: str, *args: int) -> int:
        result = self.call(name, *args)
        if result < 0:
            raise TraceFailed(-result, f"{name} in process {self.pid}: {os.strerror(-result)}")
        return result

    def fork_event(self) -> int:
        return _forked(self.pid)

    def release(self, stopped: bool) -> None:
        """Put the registers back as they were at the stop (a call interrupted there is made again) and let the
        process go: stopped (``SIGSTOP`` pending, as between a session's cells), or running."""
        regs = Regs.from_buffer_copy(self.saved)
        if -_signed(regs.rax) in _RESTARTS:
            restart = -_signed(regs.rax) == 516
            regs.rip, regs.orig_rax = self.at, _NONE
            regs.rax = NR["restart_syscall"] if restart else self.saved.orig_rax
        _set_registers(self.pid, regs)  # as they were, its flags too
        _ptrace(_DETACH, self.pid, 0, _SIGSTOP if stopped else 0)
