"""Python sources of the tasks: the prompts' helpers (HumanEval-style) and the longer solutions."""

POLY = '''import math


def poly(xs: list, x: float):
    """Evaluates the polynomial with coefficients xs at x."""
    return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))'''

PALINDROME = '''def is_palindrome(s: str) -> bool:
    """Whether s reads the same both ways."""
    return s == s[::-1]'''

KEY = '''def key(x: int) -> int:
    """The order the result must follow: by the value modulo 10."""
    return x % 10'''

SHIFT = '''def encode_shift(s: str):
    """Shifts every letter by 5 in the alphabet."""
    return "".join(chr(((ord(ch) + 5 - ord("a")) % 26) + ord("a")) for ch in s)'''

FIB_RECURSIVE = """from functools import lru_cache


@lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
"""
FIB_GENERATOR = """def _fibs():
    a, b = 0, 1
    while True:
        yield a
        a, b = b, a + b


def fib(n):
    for i, x in enumerate(_fibs()):
        if i == n:
            return x
"""
FIND_ZERO = """def find_zero(xs):
    lo, hi = -1.0, 1.0
    while poly(xs, lo) * poly(xs, hi) > 0:
        lo, hi = lo * 2, hi * 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if poly(xs, lo) * poly(xs, mid) <= 0:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2
"""
ROMAN = """def to_roman(n):
    vals = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
            (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]
    out = ""
    for v, s in vals:
        while n >= v:
            out += s
            n -= v
    return out
"""
SEARCH = """def search(xs, x):
    lo, hi = 0, len(xs) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if xs[mid] == x:
            return mid
        if xs[mid] < x:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1
"""
FLATTEN_GENERATOR = """def _walk(x):
    if isinstance(x, list):
        for y in x:
            yield from _walk(y)
    else:
        yield x


def flatten(nested):
    return list(_walk(nested))
"""
