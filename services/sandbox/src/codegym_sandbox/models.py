"""Wire models of the native ``/v1`` API, built for RL throughput: public, so clients (the evaluator) share them."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, model_validator

from .quoting import quoted
from .verdicts import Verdict


# How a stdin test's output is compared with the expected one (see ``judging.compare.outputs_match``). No
# docstring: it would become the enum's description in the OpenAPI schema.
class Comparison(str, Enum):
    EXACT = "exact"  # byte for byte, apart from trailing newlines (as verl compares)
    WHITESPACE = "whitespace"  # the same tokens, however spaced
    FLOAT = "float"  # tokens equal; a number written with a point or an exponent within a tolerance, others exactly


# How a call test's returned value is compared with the expected one (see ``agent/call_test.py``).
class CallComparison(str, Enum):
    JSON = "json"  # the JSON values, types apart (a bool is no number); an expected float within a tolerance
    PYTHON = "python"  # Python's == (True == 1, a Fraction equal to a float), as LiveCodeBench's harness
    APPS = "apps"  # Python's ==, a returned list of tuples as a list of lists too, as APPS's (and TACO's) harness


# The unknown fields a request's object names in errors of their own at most (more are one error).
MAX_UNKNOWN = 16
# The files a run may send and fetch, in all (their names travel in one frame's header to the worker: ``api/files``).
MAX_FILES = 4096


def at_most(most: int, what: str = "items", kinds: tuple[type, ...] = ()) -> BeforeValidator:
    """A list's or a mapping's bound, checked at its length before any item of it is validated: each wrong item was
    an error made on the event loop, and a list of a million of them held every client's requests 17 s, one of four
    million the server's memory until it was killed (rounds 61, 62). With ``kinds``, the types its items (a
    mapping's values) may have, its wrong items are one error too: 4,096 wrong files and as many wrong names were
    8,192 errors from 41 KB, 20 to 50 times a valid body's time on the loop (round 63)."""

    def check(value: object) -> object:
        if isinstance(value, (list, dict)) and len(value) > most:
            raise ValueError(f"{len(value)} {what}: at most {most}")
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        if kinds and (wrong := sum(not isinstance(item, kinds) for item in items)):
            allowed = " or ".join("null" if kind is type(None) else "strings" for kind in kinds)
            raise ValueError(f"{wrong} of the {what} are not {allowed}")
        return value

    return BeforeValidator(check)


# A request's files (name -> content) and names to fetch, bounded as they are read. A list that only a larger bound
# limits (``max_runs_per_request``) is validated ``fail_fast``: to its first wrong item.
Files = Annotated[dict[str, str | None], at_most(MAX_FILES, "files", (str, type(None)))]
TextFiles = Annotated[dict[str, str], at_most(MAX_FILES, "files", (str,))]
Names = Annotated[list[str], at_most(MAX_FILES, "names", (str,))]


class Strict(BaseModel):
    """A request's model that refuses unknown fields: at most ``MAX_UNKNOWN`` of them are named, in one error, before
    any field is validated (each was an error of its own, made on the event loop: a body of a million unknown keys
    held every client 11 s, four million OOM-killed the server; round 62)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _few_unknown(cls, data: object) -> object:
        if isinstance(data, dict) and len(data) > len(cls.model_fields):
            unknown = [key for key in data if key not in cls.model_fields]
            if len(unknown) > MAX_UNKNOWN:
                named = ", ".join(sorted(quoted(str(key)) for key in unknown[:5]))
                raise ValueError(f"{len(unknown)} unknown fields, among them {named}")
        return data


class LimitsIn(Strict):
    """Per-request limits; values above the server's maxima are clamped to them."""

    timeout_s: float | None = Field(None, gt=0, description="Wall-clock limit of each run.")
    memory_mb: int | None = Field(None, gt=0, description="Memory limit of each run.")
    compile_timeout_s: float | None = Field(None, gt=0, description="Wall-clock limit of the compile step.")


class ExecuteRequest(Strict):
    language: str
    code: str
    stdin: str | None = None
    files: Files = Field(default_factory=dict, description="name -> base64 content")
    fetch_files: Names = Field(default_factory=list)
    limits: LimitsIn = Field(default_factory=LimitsIn)
    cache: bool = Field(True, description="answer from the result cache when the same run ran before (false: run it)")


class StepOut(BaseModel):
    verdict: Verdict
    exit_code: int | None
    signal: int | None
    wall_s: float
    cpu_s: float | None
    max_rss_kb: int | None
    stdout: str
    stderr: str
    output_truncated: bool
    cached: bool
    error: str | None = None


class ExecuteResponse(BaseModel):
    verdict: Verdict
    compile: StepOut | None
    run: StepOut | None
    files: dict[str, str] = Field(default_factory=dict)


class Test(Strict):
    """One test. Exactly one kind: ``stdin``+``expected_stdout``, ``call``+``expected``, or ``assert_code``."""

    stdin: str | None = None
    expected_stdout: str | None = None
    call: list[Any] | None = Field(None, description="positional arguments of a call to `function`")
    kwargs: dict[str, Any] | None = None
    expected: Any = None
    assert_code: str | None = Field(None, description="Python run after the program; passes if it raises nothing")

    @model_validator(mode="after")
    def _one_kind(self) -> Test:
        kinds = [self.expected_stdout is not None, self.call is not None, self.assert_code is not None]
        if sum(kinds) != 1:
            raise ValueError("a test needs exactly one of: expected_stdout, call (with expected), assert_code")
        # A call's expected value may be null (a function that returns None), but it must be given: one left
        # out would be taken for null, and a program that computes nothing would pass.
        if self.call is not None and "expected" not in self.model_fields_set:
            raise ValueError("a `call` test needs `expected` (null for a function that returns None)")
        return self


class EvaluateRequest(Strict):
    """Many candidate programs against one shared test set (a GRPO group shares its tests)."""

    language: str
    programs: list[str] = Field(min_length=1, fail_fast=True)
    tests: list[Test] = Field(min_length=1)
    function: str | None = Field(
        None,
        description="function called by `call` tests; for `assert_code` tests, the task's entry point, which is "
        "the program's even where a builtin has its name (`def sorted`) (Python)",
    )
    comparison: Comparison = Field(Comparison.EXACT, description="how stdin tests' outputs are compared")
    call_comparison: CallComparison = Field(CallComparison.JSON, description="how call tests' values are compared")
    rel_tol: float = Field(1e-6, ge=0)
    abs_tol: float = Field(1e-6, ge=0)
    early_stop: bool = Field(
        False, description="stop a program at its first failing test (in test order; never timing-dependent)"
    )
    limits: LimitsIn = Field(default_factory=LimitsIn)
    cache: bool = Field(True, description="answer from the result cache when the same run ran before (false: run it)")
    # How much of each test's output its answer shows (``judging.judge.shown_bytes``), set for the whole request
    # the group comes in: none of the wire's.
    _shown_bytes: int = PrivateAttr(1024)

    @model_validator(mode="after")
    def _function_for_calls(self) -> EvaluateRequest:
        if any(t.call is not None for t in self.tests) and not self.function:
            raise ValueError("`call` tests need `function`: the name of the function to call")
        if self.function is not None and not self.function.isidentifier():
            raise ValueError(f"`function` must be a Python identifier, not {self.function[:64]!r}")
        return self


class TestOut(BaseModel):
    verdict: Verdict
    wall_s: float
    cpu_s: float | None
    stdout: str = Field(description="first KiB of the output, for debugging")
    stderr: str = Field(description="last KiB of stderr")


class ProgramOut(BaseModel):
    verdict: Verdict = Field(description="AC when every test passed, else the first failing test's verdict")
    passed: int
    total: int
    stopped_early: bool
    compile: StepOut | None
    tests: list[TestOut]


class EvaluateResponse(BaseModel):
    results: list[ProgramOut]
    wall_s: float


class EvaluateBatchRequest(Strict):
    """Several groups, each with its own tests (many tasks' samples at once): one answer per group, as
    ``/v1/evaluate`` gives it. Their runs count together against the server's ``max_runs_per_request``."""

    requests: list[EvaluateRequest] = Field(min_length=1)


class EvaluateBatchResponse(BaseModel):
    responses: list[EvaluateResponse]
    wall_s: float


class LanguageOut(BaseModel):
    name: str
    aliases: list[str]
    available: bool
    compiled: bool
    detail: str


Kind = Literal["stdio", "call", "assert"]
