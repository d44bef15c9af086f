"""The stand-in the tests get for a function of the program's: a call of it is a call in the program's process; what
the tests read of it as a function (its docstring, code object, signature, source) is what the program's text says
(``program_text``), never the checker's own function's, nor anything the program's process answers.

Where the text says what the name holds (one plain ``def``), the stand-in passes for that function:
``inspect.isfunction`` holds, ``f.__code__`` is the code the checker compiled from the program's text (so
``co_names``, ``dis`` and ``co_argcount`` read the program's own bytecode), ``f.__doc__`` its docstring,
``inspect.signature(f)`` its parameters, ``inspect.getsource(f)`` its lines, and doctest finds its examples (which
it never runs here: ``program_doctests``). Where it does not (a decorated function, one bound twice or
by an assignment, a program that can rebind names without naming them), the stand-in is no function to
``inspect``: it has no code object, defaults or annotations, and its signature (and a docstring the text gives
examples in) is :class:`NotCarried` (the run's error, never an empty answer a test could pass on). No stand-in has
the function's globals, which are the program's, in its process.
"""

from __future__ import annotations

import types
from typing import Any

from .program_text import Function, NotCarried, Text, signature


class _Kind(type):
    @property
    def __module__(cls) -> str:  # type: ignore[override]
        # The class's own module (``type(f).__module__``), where its instances' is a property: the program's.
        return __name__


class ProgramFunction(metaclass=_Kind):
    """A function of the program's, named ``name`` at its top level, called through ``checker``."""

    __slots__ = ("__dict__", "__weakref__", "_checker", "_module", "_name", "_text")

    def __init__(self, name: str, checker: Any, text: Text, module: str) -> None:
        self._name, self._checker, self._text, self._module = name, checker, text, module

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._checker.call(["name", self._name], args, kwargs)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        # A function of the program's bound to a name of a class of the tests' is a method there, as beside the program.
        return self if instance is None else types.MethodType(self, instance)

    def __repr__(self) -> str:
        return f"<function {self._name} at {id(self):#x}>"

    def __copy__(self) -> ProgramFunction:
        return self  # a function is copied as itself (the copy would hold the checker)

    def __deepcopy__(self, memo: Any) -> ProgramFunction:
        return self

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(f"the program's function {self._name} cannot be pickled by the tests")

    def _function(self) -> Function | None:
        try:
            return self._text.function(self._name)
        except Exception:  # a text the checker cannot read: nothing of it is carried
            return None

    def _carried(self, what: str) -> Function:
        function = self._function()
        if function is None:
            raise NotCarried(
                f"the {what} of the program's {self._name} is not carried to the tests: the program's text does not "
                "say what it is (a decorated function, a name bound more than once, or a program that binds names "
                "without naming them)"
            )
        return function

    def _known(self, what: str) -> Function:
        # For what an object need not have (``getattr(f, "__code__", None)`` reads no function in it): absent.
        function = self._function()
        if function is None:
            raise AttributeError(f"the {what} of the program's {self._name} is not carried to the tests")
        return function

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # ``inspect.isfunction`` (and doctest's, ``inspect.getsource``'s tests of it) holds where the text says what
        # the function is; ``type()`` is still this class, which no checker's own test takes for the tests' function.
        return types.FunctionType if self._function() is not None else ProgramFunction

    @property
    def __name__(self) -> str:
        return self._name

    def __getattr__(self, name: str) -> Any:
        if name == "__qualname__":  # a class's own __qualname__ cannot be a property: read here, where none is found
            return self._name
        # Nor its globals, which are the program's, in its process (``f.__globals__``: no test reads them here).
        raise AttributeError(f"'function' object (the program's {self._name}) has no attribute {name!r} here")

    @property
    def __module__(self) -> str:  # type: ignore[override]
        return self._module

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        function = self._function()
        if function is None and self._text.has_examples(self._name):
            self._carried("docstring")
        return None if function is None else function.doc

    @property
    def __code__(self) -> types.CodeType:
        return self._known("code").code

    @property
    def __signature__(self) -> Any:
        return signature(self._carried("signature"))

    @property
    def __defaults__(self) -> tuple[Any, ...] | None:
        parameters = signature(self._known("defaults")).parameters.values()
        found = tuple(p.default for p in parameters if p.kind <= p.POSITIONAL_OR_KEYWORD and p.default is not p.empty)
        return found or None

    @property
    def __kwdefaults__(self) -> dict[str, Any] | None:
        parameters = signature(self._known("defaults")).parameters.values()
        found = {p.name: p.default for p in parameters if p.kind == p.KEYWORD_ONLY and p.default is not p.empty}
        return found or None

    @property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]
        found = signature(self._known("annotations"))
        annotations = {p.name: p.annotation for p in found.parameters.values() if p.annotation is not p.empty}
        if found.return_annotation is not found.empty:
            annotations["return"] = found.return_annotation
        return annotations

    @property
    def __closure__(self) -> None:
        self._known("closure")
        return None  # a function defined at the module's top level has none
