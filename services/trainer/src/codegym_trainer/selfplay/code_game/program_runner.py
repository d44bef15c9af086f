"""Running writers' programs for the code-output game: twice each, in the sandbox, under tight limits.

Both runs must print the same thing. The sandbox runs every Python program with the same string-hash seed
(``PYTHONHASHSEED=0``), so a program whose output follows the order of a set of strings would print the same
thing twice there and still be unpredictable to a reader. So each run goes through a launcher that replaces
itself (``execve``) with a fresh interpreter under a hash seed of its own (``hash_seeds``): the two runs see
different orders, and such a program is caught as nondeterministic. The two seeds are drawn afresh for each
program: under a fixed pair, the sets whose orders happen to agree under both would pass every game, in orders
a writer could learn from its own outputs and a reader could not work out from the text. The fresh interpreter
gets ``-S -s`` (the standard library only, whatever the machine has installed), so a game is the same on every
machine, and runs the program under ``program_guard.GUARD``, which refuses the acts a program that only
computes never needs; each run also has a working directory, an environment and a process id of its own, so
that what a program reads of its machine shows as the two runs' disagreement.

Every request asks the sandbox not to answer from its result cache: two identical runs would otherwise be
one run, and the determinism check would check nothing.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
from codegym_evaluator.ask_again import AskAgain
from codegym_evaluator.scoring import RunOutput, run_output
from codegym_sandbox.client import SandboxError, SandboxUnavailable
from codegym_sandbox.models import ExecuteRequest, LimitsIn
from codegym_sandbox.verdicts import Verdict

from ...sandbox import RunSandbox
from .program_guard import GUARD

PROGRAM_FILE = "game.py"
SEEDS = range(1, 2**32)  # PYTHONHASHSEED's values but 0, which turns hashing's randomness off


def hash_seeds() -> tuple[str, str]:
    """Two distinct hash seeds for one program's two runs, drawn at random each time."""
    first, second = secrets.SystemRandom().sample(SEEDS, 2)
    return str(first), str(second)


# A working directory, an environment and a process id of the run's own (a process made and ended a random
# number of times first): what a program could print of its machine without any act the guard refuses differs
# between the two runs, and shows as their disagreement. The environment holds nothing else: a value the same on
# every run (the sandbox's PATH) would be a fact the program's text does not show.
LAUNCHER = """\
import os, sys
here, file = os.urandom(8).hex(), os.path.abspath({file!r})
os.mkdir(here)
for _ in range(os.urandom(1)[0] % 16):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
os.chdir(here)
env = {{"PYTHONHASHSEED": {seed!r}, "LANG": "C.UTF-8", "HOME": os.getcwd(), "TMPDIR": os.getcwd(), "RUN": here}}
os.execve(sys.executable, [sys.executable, "-S", "-s", "-B", "-c", {guard!r}, file], env)
"""


@dataclass(frozen=True)
class GameLimits:
    """Limits of each run: a game's program is short, so anything slow or large is a broken program."""

    timeout_s: float = 2.0
    memory_mb: int = 256


def run_request(program: str, hash_seed: str, limits: GameLimits) -> ExecuteRequest:
    """The ``/v1/execute`` request that runs ``program`` once under ``hash_seed``, uncached."""
    return ExecuteRequest(
        language="python",
        code=LAUNCHER.format(file=PROGRAM_FILE, seed=hash_seed, guard=GUARD),
        files={PROGRAM_FILE: base64.b64encode(program.encode()).decode()},
        limits=LimitsIn(timeout_s=limits.timeout_s, memory_mb=limits.memory_mb),
        cache=False,
    )


class ProgramRunner:
    """Runs programs twice through the run's sandbox (its URLs, token, retries and request timeout: the seam's
    ``context.sandbox``), ``sandbox.concurrency`` runs at a time.

    A request the sandbox could not answer (unreachable, an HTTP error) is retried by the client's retry policy,
    ``sandbox.retries`` times, moving on to the next URL; a run that came back SE is asked again as every route
    asks (:class:`~codegym_evaluator.ask_again.AskAgain`, with the same policy). A run still unjudged after that
    comes back with verdict ``SE``, which masks the round's rewards.
    ``transport`` lets a test put a transport under every URL's client.
    """

    def __init__(
        self,
        sandbox: RunSandbox,
        *,
        limits: GameLimits = GameLimits(),
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.limits = limits
        self._client = sandbox.client(limits.timeout_s, transport=transport)
        self._ask_again = AskAgain(sandbox.retry)
        self._pool = ThreadPoolExecutor(max_workers=sandbox.concurrency, thread_name_prefix="code-game-run")

    def __enter__(self) -> ProgramRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._client.close()

    def run_once(self, program: str, hash_seed: str) -> RunOutput:
        """One run of ``program`` under ``hash_seed``, retried while the sandbox cannot judge it."""
        request = run_request(program, hash_seed, self.limits)

        def unavailable(exc: SandboxError) -> RunOutput:  # the client has already retried what is worth retrying
            why = f"sandbox unreachable: {exc}" if isinstance(exc, SandboxUnavailable) else str(exc)
            return RunOutput(Verdict.SE, "", "", None, why)

        return self._ask_again.one(lambda: run_output(self._client.execute(request)), unavailable)

    def run_twice(self, programs: Sequence[str]) -> list[tuple[RunOutput, RunOutput]]:
        """Each program's two runs, under two hash seeds drawn for it (``hash_seeds``), all concurrently."""
        submit = self._pool.submit
        futures = []
        for program in programs:
            first, second = hash_seeds()
            futures.append((submit(self.run_once, program, first), submit(self.run_once, program, second)))
        return [(a.result(), b.result()) for a, b in futures]
