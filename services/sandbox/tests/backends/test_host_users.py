"""Each worker's programs are a host user of their own, and bounded in what they take of the kernel's counts per
user (issue 32 family 1); the effects on runs are in tests/security/test_user_counts.py."""

from __future__ import annotations

import asyncio
import resource

import pytest
from codegym_sandbox.backends import choose, pool
from codegym_sandbox.backends.worker import AgentWorker
from codegym_sandbox.config import Settings


def test_the_programs_uids_are_a_range_of_one_per_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(backend="local", host_uid=2_000_000, container_user="3000:3001")
    monkeypatch.setattr(choose.os, "geteuid", lambda: 0)
    assert choose.program_uids(settings, None, 130) == range(2_000_000, 2_000_130)
    assert choose.program_uids(settings, settings.container_user, 4) == range(3000, 3004)
    with pytest.raises(ValueError, match="past the last uid"):
        choose.program_uids(Settings(backend="local", host_uid=choose.LAST_UID - 2), None, 4)
    config = choose.agent_config(settings, None, 130)
    assert config["host_uid"] == 2_000_000  # the first: each agent adds its slot
    monkeypatch.setattr(choose.os, "geteuid", lambda: 1000)
    assert choose.program_uids(settings, None, 130) is None  # without root: the server's own uid, shared
    assert choose.agent_config(settings, None, 130)["host_uid"] is None


@pytest.mark.parametrize("workers", [1, 2, 128, 4096])
def test_all_workers_queued_signals_stay_within_half_the_servers(workers: int) -> None:
    share = choose.queued_signals(workers)
    own = resource.getrlimit(resource.RLIMIT_SIGPENDING)[0]
    assert 1 <= share <= choose.QUEUED_SIGNALS
    if own != resource.RLIM_INFINITY and own >= 2 * workers:
        assert share * workers <= own // 2
    assert choose.agent_config(Settings(backend="local"), "1000:1000", workers)["queued_signals"] == share


class _Worker(AgentWorker):
    async def start(self) -> None:
        pass

    @property
    def alive(self) -> bool:
        return True

    async def kill(self) -> None:
        pass


class _Pool(pool.WorkerPool):
    def make_worker(self, slot: int) -> AgentWorker:
        return _Worker(slot, {})


def test_a_lent_slot_is_not_started_again_while_its_last_worker_is_being_killed() -> None:
    # Two workers of one slot alive at once would be one host user: the slot waits for its last one to go.
    async def main() -> None:
        p = _Pool(1, 1000, {})
        p.max_workers, p.reserve_workers = 4, 0
        p._workers = [_Worker(0, {}), None, None, None]
        p._doomed.add(_Worker(1, {}))  # replaced, its kill not done yet
        p._grants = 3
        p._start_ahead(idle_cpus=2.0)
        assert p._starting == {2, 3}
        p._stopping = True
        await asyncio.gather(*p._tasks)

    asyncio.run(main())
