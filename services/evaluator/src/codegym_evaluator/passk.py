"""The unbiased pass@k estimator (Chen et al., 2021), in its numerically stable product form."""

from __future__ import annotations

import math


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of ``k`` samples drawn from ``n`` (``c`` correct) is correct.

    ``1 - C(n-c, k) / C(n, k)``, computed as ``1 - prod(1 - k / i for i in n-c+1..n)`` so that large ``n``
    never overflows.

    >>> pass_at_k(10, 0, 1), pass_at_k(10, 10, 1), round(pass_at_k(10, 3, 1), 6), round(pass_at_k(10, 3, 5), 6)
    (0.0, 1.0, 0.3, 0.916667)
    """
    if not (0 <= c <= n):
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))
