"""A value of the program's that stayed in its process, as the checker holds it: a handle.

It only equals itself (or another handle to the same object, as the program compares them), and passes what
is done to it on to the program's process (``program_process``), whose answer crosses as plain data
(``plain_data``). No code of the program's runs in the checker through it.
"""

from __future__ import annotations

import collections
import weakref
from typing import Any, cast

from . import handle_operators


class Handle:
    """A value that stayed in the program's process, and can be passed back to it.

    It never equals plain data. Two handles are compared by the program (both sides are its own objects,
    such as instances of a class it defines).
    """

    def __init__(self, ref: int, text: str, checker: Any = None, callable_: bool = False) -> None:
        self._ref, self._text, self._checker, self._callable = ref, text, checker, callable_

    def __repr__(self) -> str:
        # The object's repr now (a stack pushed onto since it crossed shows what it holds); its repr as it crossed
        # where the program's process cannot answer.
        if self.__dict__.get("_checker") is None:
            return self._text
        try:
            text = self._ask("repr")
        except BaseException:  # the checker noted what went wrong (an ended process, a breach)
            return self._text
        return text if type(text) is str else self._text

    def __instancecheck__(self, instance: Any) -> bool:
        # ``isinstance(s, Stack)``, Stack a class of the program's: the program's answer, of its own objects and
        # plain data (an object of the tests' is no instance of a class of the program's).
        try:
            return self._ask("isinstance", instance) is True
        except TypeError:  # no plain data, or no class
            return False

    def __subclasscheck__(self, subclass: Any) -> bool:
        return isinstance(subclass, Handle) and self._ask("issubclass", subclass) is True

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Handle):
            return False
        if self._checker is None:
            return other._ref == self._ref
        return self._checker.same(self._ref, other._ref) is True  # its own ==, of itself too (which may raise)

    def __hash__(self) -> int:  # with no process to ask; a class of handles has the program's hash, or none
        return hash(("handle", self._ref))

    def __ne__(self, other: object) -> bool:
        # Two objects of the program's: its own ``!=`` (which need not be ``not ==``); else they differ.
        if not isinstance(other, Handle) or self.__dict__.get("_checker") is None:
            return True
        return self._ask("ne", other) is True

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        # ``class TestX(Base)`` on a class of the program's: no class here can have it as a base (the class
        # statement would otherwise make a handle, and a runner would find no tests in it).
        raise TypeError(f"{self._text}, of the program's, cannot be a base of a class of the tests")

    # What tests do with an object of the program's (``Solution().twoSum(...)``, ``len(tree)``, ``obj.val``):
    # done by the program's process on its own object; only the plain data (or a handle) comes back.
    def __getattr__(self, name: str) -> Any:
        if (name.startswith("__") and name not in _NAMES) or self.__dict__.get("_checker") is None:
            raise AttributeError(name)  # protocols the interpreter probes (copy, pickle): not the program's
        return self._checker.operate("getattr", self._ref, name)

    def __getitem__(self, key: Any) -> Any:
        return self._ask("getitem", key)

    def __bool__(self) -> bool:
        return self._ask("bool") is True

    def __str__(self) -> str:
        text = self._ask("str")
        if type(text) is not str:
            raise TypeError(f"str() of {self._text} is not a str")
        return text

    def __format__(self, spec: str) -> str:
        text = self._ask("format", spec)
        if type(text) is not str:
            raise TypeError(f"format() of {self._text} is not a str")
        return text

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            self._ask("setattr", name, value)

    def __delattr__(self, name: str) -> None:
        self._ask("delattr", name)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._ask("setitem", key, value)

    def __delitem__(self, key: Any) -> None:
        self._ask("delitem", key)

    def _ask(self, op: str, *args: Any) -> Any:
        if self._checker is None:
            raise TypeError(f"{self._text} does not support {op}")
        return self._checker.operate(op, self._ref, *args)


_NAMES = frozenset({"__name__", "__qualname__"})  # a class's or function's names: the program's
_OWN = frozenset({"_ref", "_text", "_checker", "_callable"})  # a handle's own attributes; any other is the object's


handle_operators.install(Handle)  # its operators: the program's, never with a comparison of the tests' values


class _Protocols(Handle):
    """The protocols a class of the program's may have, each on the class of handles made for it only where the
    program's class has it (``_class``): where it lacks one, Python's own fallback runs on the handle (``in`` and
    ``reversed`` through iteration and items), and ``collections.abc`` sees what the program's class is."""

    def __hash__(self) -> int:
        # The program's hash of its object: two equal points are one dict key, as beside the program.
        value = self._ask("hash")
        if type(value) is not int:
            raise TypeError(f"the hash of {self._text} is not an int")
        return value

    def __enter__(self) -> Any:
        return self._ask("enter")

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        # The program's __exit__ runs, told what the block raised (its builtin type and message), but never ends
        # the block: what the tests raised there reaches them, as anything the program's object swallowed would
        # leave the block's assertions unrun (a task whose context manager must suppress an error: open).
        self._ask("exit", None if exc is None else [_builtin_name(type(exc)), str(exc)[:1000]])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._callable or self._checker is None:
            raise TypeError(f"{self._text} is not callable")
        return self._checker.call(["ref", self._ref], args, kwargs)

    def __len__(self) -> int:
        length = self._ask("len")
        if type(length) is not int:  # plain data, exactly: nothing of the program's runs here
            raise TypeError(f"the length of {self._text} is not an int")
        return length

    def __iter__(self) -> Any:
        return _iterator(self, "iter")

    def __reversed__(self) -> Any:
        return _iterator(self, "reversed")

    def __next__(self) -> Any:
        # The iterator protocol itself: the program's ``StopIteration`` is the end of its iterator here too (a
        # call's is its error: ``program_errors``). The answer is a pair: ended, and the item.
        answer = self._ask("next")
        if type(answer) is not tuple or len(answer) != 2 or type(answer[0]) is not bool:
            raise TypeError(f"next() of {self._text} answered no item")
        if answer[0]:
            raise StopIteration
        return answer[1]

    def __contains__(self, item: Any) -> bool:
        return self._ask("contains", item) is True


def _iterator(handle: Handle, op: str) -> Any:
    """The program's iterator of its object: the object itself where it is its own (the tests hold it, and see its
    state step by step), else read in batches (one round trip an item took seconds for a long one)."""
    it = handle._ask(op)
    if not isinstance(it, Handle):
        raise TypeError(f"{op}() of {handle._text} answered no iterator")
    return it if it._ref == handle._ref else _Batched(it)


class _Batched:
    """An iterator of the program's that no test holds as an object (a generator its ``__iter__`` returned), read in
    batches of 1, 2, 4, ... up to :data:`BATCH` items: an endless one is read only as far as the tests go, a long
    one in few round trips. What it does runs that far ahead of the tests' loop (open: a generator that reads state
    the tests change between its steps sees it late)."""

    def __init__(self, it: Handle) -> None:
        self._it, self._items, self._ended, self._size = it, collections.deque[Any](), False, 1

    def __iter__(self) -> _Batched:
        return self

    def __next__(self) -> Any:
        if not self._items and not self._ended:
            answer = self._it._ask("batch", self._size)
            if (
                type(answer) is not tuple
                or len(answer) != 2
                or type(answer[0]) is not bool
                or type(answer[1]) is not list
            ):
                raise TypeError("the program's iterator answered no items")
            self._ended, items = answer
            self._items.extend(items)
            self._ended = self._ended or len(items) < self._size
            self._size = min(2 * self._size, BATCH)
        if not self._items:
            raise StopIteration
        return self._items.popleft()


BATCH = 1024


def _builtin_name(kind: type) -> str:
    return next(k for k in kind.__mro__ if k.__module__ == "builtins").__name__


class Refs(list[Any]):
    """The program's objects that the checker holds handles to (in the program's process), each under one number
    however often it crosses: a node returned twice, or given back inside a changed list, is one handle."""

    def __init__(self) -> None:
        super().__init__()
        self._at: dict[int, int] = {}  # by id: each object is held here, so no other takes its id

    def number(self, value: Any) -> int:
        at = self._at.get(id(value))
        if at is None:
            at = self._at[id(value)] = len(self)
            self.append(value)
        return at


# The handles the tests hold, by their checker and number: one object of the program's is one handle while they
# hold it (``is``, ``in`` and dict keys hold, as beside the program). A handle holds its checker, so the checker's
# id is not another's while the entry lasts.
_HELD: weakref.WeakValueDictionary[tuple[int, int], Handle] = weakref.WeakValueDictionary()


# The protocols a handle answers that a class of the program's may lack: a handle of an object whose class lacks one
# lacks it too, so ``collections.abc`` (``Iterator``, ``Sized``, ``Callable``) sees the program's class, not a handle.
PROTOCOLS = (
    *("__iter__", "__next__", "__len__", "__contains__", "__call__", "__hash__", "__enter__", "__exit__"),
    "__reversed__",
)
_MOST_CLASSES = 1 << 16  # classes of the program's whose objects cross in one run (one per call too): then a breach

# The class of handles for each class of the program's, by its checker and the class's number: ``type(a) is type(b)``
# holds for two objects of one class only (as the program's process says: it answers for its objects' classes as
# for their ``==``), and ``type(s).__name__`` and ``__module__`` are the class's.
_CLASSES: weakref.WeakKeyDictionary[Any, dict[int, tuple[tuple[Any, ...], type[Handle]]]] = weakref.WeakKeyDictionary()


def class_of(kind: type, refs: Refs) -> list[Any]:
    """What a handle says of its object's class ``kind`` (in the program's process): its number, name, module, and
    the protocols of :data:`PROTOCOLS` it defines."""
    has = [name for name in PROTOCOLS if _defines(kind, name)]
    name, module = getattr(kind, "__qualname__", None), getattr(kind, "__module__", None)
    name = name[:200] if type(name) is str and name else "object"
    return [refs.number(kind), name, module[:200] if type(module) is str else "?", has]


def _defines(kind: type, name: str) -> bool:
    """Whether instances of ``kind`` have the method ``name`` as Python looks it up: in the class's own lineage, not
    its metaclass's, and not set to None there (``__hash__ = None``)."""
    for base in getattr(kind, "__mro__", ()):
        found = vars(base).get(name, _MISSING)
        if found is not _MISSING:
            return found is not None
    return False


_MISSING = object()


def is_class(rest: list[Any]) -> bool:
    """Whether ``rest`` (what follows a handle's callable flag) is a class as :func:`class_of` writes it."""
    kind = rest[0] if len(rest) == 1 else None
    if type(kind) is not list or len(kind) != 4 or [type(k) for k in kind] != [int, str, str, list]:
        return False
    return all(type(p) is str for p in kind[3]) and set(kind[3]) <= set(PROTOCOLS) and len(set(kind[3])) == len(kind[3])


def handle(ref: int, text: str, checker: Any, callable_: bool, kind: list[Any]) -> Handle:
    """The checker's handle of the program's object numbered ``ref``, of the class ``kind`` stands for (its
    number, name, module and protocols, as the program's process answered them)."""
    made = _HELD.get((id(checker), ref))
    if made is None:
        made = Handle.__new__(_class(checker, kind))
        Handle.__init__(made, ref, text, checker, callable_)  # not the class's own call: that is the program's
        _HELD[(id(checker), ref)] = made
    return made


class _ProgramClass(type):
    """The class of the classes of handles: calling one calls the program's class (``type(v)(4, 6)`` makes
    another ``Vec`` there), never a handle of a number the tests chose."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        checker = cls.__dict__["_checker"]()
        if checker is None:
            raise TypeError(f"{cls.__qualname__} of the program's cannot be made here")
        return checker.call(["ref", cls.__dict__["_number"]], args, kwargs)


def _class(checker: Any, kind: list[Any]) -> type[Handle]:
    number, qualname, module, has = kind
    made = _CLASSES.setdefault(checker, {})
    said = (qualname, module, tuple(has))
    if number in made:
        if made[number][0] != said:  # one class, told two ways: the program's process answered what is no class
            raise ValueError(f"the program's class {number} was {made[number][0][0]!r}, now {qualname!r}")
        return made[number][1]
    if len(made) >= _MOST_CLASSES:
        raise ValueError(f"more than {_MOST_CLASSES} classes of the program's crossed")
    namespace = {"__qualname__": qualname, "__module__": module, "_checker": weakref.ref(checker), "_number": number}
    # The protocols it has, and no other (a hash it lacks is None: Handle's own would stand for it).
    namespace |= {name: vars(_Protocols)[name] for name in PROTOCOLS if name in has}
    namespace |= {} if "__hash__" in has else {"__hash__": None}
    made_class = cast("type[Handle]", _ProgramClass(qualname.rpartition(".")[2] or "object", (Handle,), namespace))
    made[number] = said, made_class
    return made_class
