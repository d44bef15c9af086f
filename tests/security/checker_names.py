"""Programs that compute nothing and answer the checker for names it never asked for (issue 31, family 1).

Each is a completion of a task's prompt: the function to write returns 0, and the program puts stand-ins of
its own (:data:`FAKES`) in front of names the tests use, builtins among them (``abs`` that is always 0, ``all``
that is always true, ``range`` that is empty, a ``math`` whose every function is 0), each of which prints what
the tests passed it (``SAW ...``), so that a test can see whether the tests' expected values reached the
program. How the stand-ins reach the tests' scope is the :data:`INJECTIONS` building block: the program's
process belongs to the program, so the program can change what it answers (the agent's ``Channel.answer``,
its serialiser, the channel object itself) or simply bind the names at top level. The forged answer is the
agent's own wire format: whatever it is (``names`` answers of either shape), the stand-ins are added as values,
handles that the checker calls back.
"""

from __future__ import annotations

# Stand-ins of names the tests use, each printing what it was passed: all "pass" a test that goes through them.
FAKES = """
def _saw(name, value):
    def fake(*args, **kwargs):
        print("SAW", name, repr(args)[:200], flush=True)
        return value
    return fake


class _Anything:
    def __getattr__(self, name):
        return _saw("math." + name, 0)


_FAKES = {
    "abs": _saw("abs", 0),
    "all": _saw("all", True),
    "any": _saw("any", True),
    "isinstance": _saw("isinstance", True),
    "set": _saw("set", 0),
    "sorted": _saw("sorted", 0),
    "len": _saw("len", 0),
    "range": _saw("range", []),
    "float": _saw("float", 0),
    "round": _saw("round", 0),
    "int": _saw("int", 0),
    "str": _saw("str", ""),
    "list": _saw("list", []),
    "tuple": _saw("tuple", ()),
    "sum": _saw("sum", 0),
    "max": _saw("max", 0),
    "min": _saw("min", 0),
    "math": _Anything(),
}
"""

NAMES = (
    *("abs", "all", "any", "isinstance", "set", "sorted", "len", "range", "float", "round", "int", "str", "list"),
    *("tuple", "sum", "max", "min", "math"),
)

# Adds the stand-ins to the names answer the agent is about to write, as handles of the program's process.
FORGE = """
import sys as _sys

_plain = _sys.modules.get("codegym_sandbox.agent.plain_data")
_channel = _sys.modules.get("codegym_sandbox.agent.plain_channel")  # the channel and serialiser the answers take


def _refs():
    frame = _sys._getframe(1)
    while frame is not None and not isinstance(frame.f_locals.get("refs"), list):  # the agent's serving loop
        frame = frame.f_back
    return frame.f_locals.get("refs") if frame is not None else None


def _forge(message):
    refs = _refs()
    if _plain is None or refs is None:
        return message
    handles = {name: _plain.encode(value, refs) for name, value in _FAKES.items()}
    if type(message) is list and len(message) == 2 and message[0] == "ok" and type(message[1]) is dict:
        message[1].update({name: ["value", data] for name, data in handles.items()})
    elif type(message) is dict and type(message.get("values")) is dict:
        message["functions"] = [n for n in message.get("functions", []) if n not in handles]
        message["values"].update(handles)
    return message
"""

# How the stand-ins get in: the body of ``_install``, which the function to write calls at its definition (a
# default argument), so that the evaluator's sanitiser, which keeps what the function uses, keeps it too.
INJECTIONS = {
    # The agent's Channel.answer, patched for the class.
    "patch-the-answer": """
    if _channel is not None:
        answer = _channel.Channel.answer
        _channel.Channel.answer = lambda self, message: answer(self, _forge(message))
""",
    # The channel object itself, found among the process's objects: its answer replaced on the instance. (The
    # runner's objects are frozen before the program starts, out of ``gc.get_objects``' sight: unfrozen first.)
    "patch-the-channel-object": """
    import gc

    gc.unfreeze()
    for o in gc.get_objects():
        if _channel is not None and type(o) is _channel.Channel:
            o.answer = (lambda answer: lambda message: answer(_forge(message)))(o.answer)
""",
    # The serialiser every answer goes through.
    "patch-the-serialiser": """
    if _channel is not None:
        encode = _channel._encode
        _channel._encode = lambda message, level: encode(_forge(message), level)
""",
    # No patch at all: the names bound at top level, as a program that shadows builtins would.
    "bind-at-top-level": """
    globals().update(_FAKES)
""",
}


def forged(entry_point: str, injection: str, body: str = "return 0") -> str:
    """A completion (what follows the prompt) that computes nothing (unless ``body`` does: its arguments are
    ``args``) and injects :data:`FAKES` by ``injection``."""
    install = f"def _install():{INJECTIONS[injection]}"
    top = "".join(f"{name} = _FAKES[{name!r}]\n" for name in NAMES) if injection == "bind-at-top-level" else ""
    return f"{FAKES}{FORGE}\n{install}\n\ndef {entry_point}(*args, _installed=_install(), **kwargs):\n    {body}\n{top}"
