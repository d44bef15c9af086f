"""numpy's arrays and scalars as plain data (``plain_data.py``): with their dtype and shape, made again as they
were, where the dtype is plain (bool, numbers, text, bytes) or objects (each item as any value crosses). A
result's ``dtype``, ``shape`` (an empty array's too) and type (an ``np.int64`` is no ``int``) are then what a
test beside the program sees. An array of any other dtype (dates, records) crosses as the list of its items,
made an array again (``["np", items]``); a scalar of one, as its item. The tests' own arrays and scalars cross to
the program's process the same way, and an array a call changes in place is changed for the tests
(``plain_data.Aliases``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

TAGS = ("npa", "nps")  # ["npa", dtype, shape, items]: an array; ["nps", dtype, item]: a scalar
_DTYPES = re.compile(r"[<>|=]?(b1|[iu][1248]|f(2|4|8|12|16)|c(8|16|24|32)|[US][0-9]{1,7}|O)")
_MOST_DIMENSIONS = 64  # numpy's own bound


def is_array(value: Any) -> bool:
    """Whether ``value`` is a numpy array (numpy is not imported for it: a value of numpy's means it is)."""
    return type(value).__name__ == "ndarray" and type(value).__module__ == "numpy"


def of_objects(value: Any) -> bool:
    """Whether ``value`` is an array of objects (whose items are values of their own, each maybe another's)."""
    return is_array(value) and getattr(value.dtype, "kind", "") == "O"


def wire(value: Any, encode: Callable[[Any], Any]) -> Any:
    """Wire data for ``value``, an array or a scalar of numpy's; ``encode`` makes its items' (``tolist()``)."""
    dtype = str(getattr(getattr(value, "dtype", None), "str", ""))
    items = encode(value.tolist())
    array = type(value).__name__ == "ndarray"
    if not _DTYPES.fullmatch(dtype):
        return ["np", items] if array else items
    if not array:  # np.int64, np.float32, np.bool_: itself again
        return ["nps", dtype, items] if not dtype.endswith("O") else items
    return ["npa", dtype, [int(n) for n in value.shape], items]


def check(tag: str, rest: list[Any], check_data: Callable[[Any], None]) -> None:
    """That ``rest`` is what :func:`wire` writes after ``tag`` (``check_data`` checks its items); else ``ValueError``
    or ``TypeError``. Items that do not fit the dtype (a str in an int array) fail as it is made: the program's
    process answered what is no value."""
    if len(rest) != (3 if tag == "npa" else 2) or type(rest[0]) is not str or not _DTYPES.fullmatch(rest[0]):
        raise ValueError(f"not a numpy value made again here: {str(rest)[:60]!r}")
    check_data(rest[-1])
    objects = rest[0].endswith("O")
    if tag == "nps":
        if objects or _sequence(rest[1]):
            raise ValueError("not a numpy scalar")
        return
    shape = rest[1]
    if type(shape) is not list or len(shape) > _MOST_DIMENSIONS or any(type(n) is not int or n < 0 for n in shape):
        raise ValueError("an array's shape is not a list of sizes")
    if not _shaped(rest[2], shape, objects):
        raise ValueError("an array's items are not of its shape")


def value(numpy: Any, tag: str, rest: list[Any], items: Any) -> Any:
    """The array or scalar ``rest`` stands for, of its items (decoded)."""
    dtype = numpy.dtype(rest[0])
    if tag == "nps":
        return dtype.type(items)
    if dtype.kind != "O":
        return numpy.array(items, dtype=dtype).reshape(rest[1])
    array = numpy.empty(rest[1], dtype=object)  # each item as it is (numpy would take a list item for a dimension)
    for index in numpy.ndindex(*rest[1]):
        item = items
        for i in index:
            item = item[i]
        array[index] = item
    return array


def _sequence(data: Any) -> bool:
    return type(data) is list and data[0] in ("l", "t")


def _shaped(data: Any, shape: list[int], objects: bool) -> bool:
    """Whether ``data`` (checked wire data) is nested lists of ``shape``, as an array's ``tolist()`` is (an item of
    an array of ``objects`` may be anything)."""
    if not shape:
        return objects or not _sequence(data)
    if type(data) is not list or data[0] != "l" or len(data) - 1 != shape[0]:
        return False
    return all(_shaped(item, shape[1:], objects) for item in data[1:])
