"""Two threads that parse at once both get their trees (CPython 3.11 shares the AST constructor's depth counter)."""

from __future__ import annotations

import ast
import gc
import threading
from collections.abc import Callable, Iterator

import pytest
from codegym_evaluator.python_syntax import parse

# Deep enough that the constructor recurses, long enough that it allocates past the collector's threshold.
SOURCE = "x = " + "(" * 30 + "1" + ")" * 30 + "\n" + "".join(f"y{i} = [[{i}, ({i},)] for _ in z]\n" for i in range(300))


@pytest.fixture
def collections_often() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(20)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _interleaved(parse_with: Callable[[str], object]) -> tuple[list[BaseException], int]:
    """Errors of two parses where the second runs whenever the first one's constructor stops for a collection,
    and how many times the second ended inside the first.

    The collector's callback, in the first thread, wakes the second and lets it parse: just what a switch of
    threads at that moment does, made certain instead of rare. Where the parses take turns, the second waits for
    the first to end and the callback's wait times out.
    """
    first = threading.get_ident()
    go, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    rounds = inside = 0

    def second() -> None:
        while go.wait(5) and not done.is_set():
            go.clear()
            try:
                parse_with(SOURCE)
            except BaseException as e:
                errors.append(e)
            done.set()

    def switch(phase: str, info: dict[str, int]) -> None:
        nonlocal rounds, inside
        if phase == "start" and threading.get_ident() == first and rounds < 3:
            rounds += 1
            done.clear()
            go.set()
            inside += done.wait(0.05)

    helper = threading.Thread(target=second, daemon=True)
    helper.start()
    gc.callbacks.append(switch)
    try:
        parse_with(SOURCE)
    except BaseException as e:
        errors.append(e)
    finally:
        gc.callbacks.remove(switch)
    done.wait(5)
    done.set()
    go.set()
    helper.join(5)
    assert rounds, "no collection ran inside the parse: the test no longer interleaves anything"
    return errors, inside


def test_a_parse_in_another_thread_waits_for_this_one(collections_often: None) -> None:
    assert _interleaved(parse) == ([], 0)


def test_the_interleaving_puts_a_plain_parse_inside_another(collections_often: None) -> None:
    # The check of the check: without the lock the second parse does run inside the first, which on CPython
    # 3.11 fails one of them.
    errors, inside = _interleaved(ast.parse)
    assert inside > 0
    assert all(isinstance(e, SystemError) and "recursion depth mismatch" in str(e) for e in errors), errors


def test_it_parses_what_ast_parses() -> None:
    assert ast.dump(parse("a = [1]\n", "<t>")) == ast.dump(ast.parse("a = [1]\n", "<t>"))
    assert isinstance(parse("1 + 2", mode="eval"), ast.Expression)
    with pytest.raises(SyntaxError):
        parse("x = (")
