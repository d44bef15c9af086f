"""A fork's copies' id maps: each maps the sessions' slots' users less its own (``host_users.lines_less``)."""

from __future__ import annotations

import pytest
from codegym_sandbox.agent import host_users

POOLS = [[], [7], list(range(100, 110)), [*range(100, 104), *range(200, 203), 300]]


@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("shift", [0, 1000])
def test_a_copys_lines_are_the_pools_less_its_own_user(pool: list[int], shift: int) -> None:
    for less in [*pool, 0, 99, 104, 250]:
        want = host_users.pool_lines([x + shift for x in pool if x != less], lambda x: x)
        assert host_users.lines_less(host_users.id_runs(pool), less, shift) == want
