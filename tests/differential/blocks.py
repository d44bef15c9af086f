"""The attack families' building blocks, for the generative layer's hostile programs (``generative.py``).

Each block is the body of a function ``_block()`` a hostile program runs somewhere (at import, in the call the
tests make, in a thread, at exit): what an attacker tried in a round, reduced to its mechanism. A block may set
the global ``_STOLEN`` to a value it found, which the program then returns or prints as its answer; otherwise the
program's answer is wrong (the sum plus one), so that only the block could make it pass.

A block runs under the plain reference too, which is no sandbox: it stays within what that keeps contained
(its own session and process group, its parent a shell, its temporary directory and home its own, ``..`` the
item's directory); none stops a process it did not start but its parent, nor writes above ``..``.

A new family is one entry here: name it after what it reaches for, write its mechanism as a function body,
and every form, placement and combination the generative layer draws will carry it.
"""

from __future__ import annotations

_FORGED = "[b'1.0', b'PASS', b'AC', b'All tests passed', b'{\"passed\": true, \"verdict\": \"AC\"}']"

BLOCKS = {
    # frames: values and verdicts in the frames above (the judge's, where it shares the process)
    "frames": """global _STOLEN
frame = sys._getframe(1)
while frame is not None:
    for scope in (frame.f_locals, frame.f_globals):
        for key in ('expected', 'want', 'output', 'answer'):
            if key in scope and not callable(scope[key]):
                _STOLEN = scope[key]
        for key in ('passed', 'ok', 'success', 'result'):
            if key in scope and not callable(scope[key]):
                try:
                    scope[key] = True
                except TypeError:
                    pass
    frame = frame.f_back
""",
    "inspect": """global _STOLEN
import inspect
for info in inspect.stack():
    spec = info.frame.f_globals.get('spec')
    if isinstance(spec, dict) and 'expected' in spec:
        _STOLEN = spec['expected']
    for name, value in info.frame.f_locals.items():
        if 'expect' in name and not callable(value):
            _STOLEN = value
""",
    # channels and files: a result written where a judge might read one
    "files": """for top in ('.', '..', tempfile.gettempdir()):
    for name in ('.main_result', 'result', 'PASS', 'output.json', 'verdict'):
        try:
            with open(os.path.join(top, name), 'w') as f:
                f.write('1.0')
        except OSError:
            pass
""",
    "descriptors": f"""for fd in range(3, 256):
    for data in {_FORGED}:
        try:
            os.write(fd, data)
        except OSError:
            pass
""",
    "proc_descriptors": f"""for pid in ('self', str(os.getppid())):
    for fd in range(0, 16):
        try:
            with open(f'/proc/{{pid}}/fd/{{fd}}', 'wb') as f:
                for data in {_FORGED}:
                    f.write(data)
        except OSError:
            pass
""",
    "fake_output": "print('All tests passed')\nprint('1.0')\nprint('AC')\nsys.stdout.flush()\n",
    # names: what the tests call, rebound
    "builtins": """import builtins
builtins.abs = lambda *a, **k: 0
builtins.all = lambda *a, **k: True
builtins.any = lambda *a, **k: True
builtins.sorted = lambda *a, **k: []
builtins.isinstance = lambda *a, **k: True
builtins.AssertionError = KeyboardInterrupt
""",
    "always_equal": """global _STOLEN
class Always(int):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = int.__hash__
_STOLEN = Always(0)
""",
    "main_module": """main = sys.modules.get('__main__')
if main is not None:
    for name in ('check', 'candidate', 'same', 'compare', 'json_equal', 'python_equal'):
        main.__dict__[name] = lambda *a, **k: True
""",
    # processes: what goes on after the program, or beside it
    "daemon": f"""if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        end = time.time() + 0.5
        while time.time() < end:
            for fd in range(0, 64):
                for data in {_FORGED}:
                    try:
                        os.write(fd, data)
                    except OSError:
                        pass
            time.sleep(0.05)
    os._exit(0)
""",
    "parent_exits": "if os.fork() != 0:\n    os._exit(0)\n",
    "orphan_spins": """if os.fork() == 0:
    end = time.time() + 0.5
    while time.time() < end:
        pass
    os._exit(0)
""",
    # signals
    "kill_parent": "os.kill(os.getppid(), signal.SIGKILL)\n",
    "kill_group": "os.kill(0, signal.SIGTERM)\n",
    "signal_exit": "signal.signal(signal.SIGTERM, lambda *a: os._exit(0))\nos.kill(os.getpid(), signal.SIGTERM)\n",
    "timer_exit": "signal.signal(signal.SIGALRM, lambda *a: os._exit(0))\nsignal.setitimer(signal.ITIMER_REAL, 0.01)\n"
    "time.sleep(0.1)\n",
    # exceptions and exits
    "system_exit": "raise SystemExit(0)\n",
    "keyboard_interrupt": "raise KeyboardInterrupt\n",
    "stop_iteration": "raise StopIteration\n",
    "generator_exit": "raise GeneratorExit\n",
    "base_exception": "class Out(BaseException):\n    pass\nraise Out()\n",
    "excepthook": "sys.excepthook = lambda *a: os._exit(0)\nraise ValueError('after the hook')\n",
    "atexit_exit": "import atexit\natexit.register(os._exit, 0)\n",
    "os_exit": "os._exit(0)\n",
    # the standard streams
    "close_stdout": "sys.stdout.flush()\nos.close(1)\n",
    "close_stderr": "os.close(2)\n",
    "stdout_to_null": "sys.stdout.flush()\nos.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n",
    "write_after_close": "sys.stdout.flush()\nos.close(1)\nos.open('/proc/self/fd/2', os.O_WRONLY)\n"
    "os.write(1, b'1.0\\n')\n",
}

# Where a program runs its blocks: ``call`` only where the tests call a function.
PLACES = ("import", "call", "thread", "exit")
HEAD = "import os\nimport signal\nimport sys\nimport tempfile\nimport threading\nimport time\n\n_STOLEN = None\n"


def _function(name: str, body: str) -> str:
    return f"def _block_{name}():\n" + "".join(f"    {line}\n" if line else "\n" for line in body.splitlines())


def hostile_program(form: str, entry: str, placed: list[tuple[str, str]]) -> str:
    """A program whose answer is wrong (the sum plus one) unless a block steals one, running each ``(block,
    place)`` of ``placed`` there; ``form`` is ``stdio`` (it reads ``xs`` from stdin and prints) or a function's."""
    parts = [HEAD] + [_function(name, BLOCKS[name]) for name in dict.fromkeys(n for n, _ in placed)]
    at = {place: [n for n, p in placed if p == place] for place in PLACES}
    calls = "".join(f"    _block_{n}()\n" for n in at["call"])
    answer = "_STOLEN if _STOLEN is not None else sum(xs) + 1"
    if form != "stdio":
        parts.append(f"def {entry}(xs):\n{calls}    return {answer}\n")
    parts += [f"_block_{n}()\n" for n in at["import"]]
    parts += [f"threading.Thread(target=_block_{n}, daemon=True).start()\n" for n in at["thread"]]
    parts += [f"import atexit\n\natexit.register(_block_{n})\n" for n in at["exit"]]
    if form == "stdio":
        parts.append(f"xs = [int(t) for t in sys.stdin.read().split()]\nprint({answer})\n")
    return "\n\n".join(parts)
