"""The typed wire (``agent/wire_schema.py``, ``protocol.py``, ``box_protocol.py``, ``cell_frames.py``): each
side that reads a frame from a less trusted one takes exactly what it asked for, and every frame it refuses maps
as it did before (the agent's and the box's failures are SE; a test series' or a checker's broken report
reruns the test alone; a notebook's kernel's ends its record)."""

from __future__ import annotations

import asyncio
import json
import typing
from typing import Annotated, Any, Literal, TypedDict

import pytest
from codegym_sandbox.agent import assert_outcome, box_protocol, cell_frames, protocol
from codegym_sandbox.agent.protocol import encode_frame
from codegym_sandbox.agent.wire_schema import Malformed, Max, Range, conform
from codegym_sandbox.backends.base import RunRequest, SandboxFault
from codegym_sandbox.backends.worker import AgentWorker


class _Inner(TypedDict):
    name: Annotated[str, Max(4)]


class _Optional(TypedDict, total=False):
    maybe: int


class _Frame(_Optional):
    op: Literal["x"]
    count: Annotated[int, Range(0, 10)]
    ratio: float
    inner: _Inner
    pair: tuple[str, int]
    items: list[int | None]
    table: dict[str, bool]
    nothing: None


GOOD: dict[str, Any] = {
    "op": "x",
    "count": 3,
    "ratio": 2,  # JSON writes 2.0 as 2
    "inner": {"name": "abcd"},
    "pair": ["a", 1],
    "items": [1, None],
    "table": {"k": True},
    "nothing": None,
}


def _with(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}


def test_conform_takes_exactly_its_type() -> None:
    assert conform(GOOD, _Frame) is GOOD
    assert conform(_with(maybe=1), _Frame)["maybe"] == 1


@pytest.mark.parametrize(
    "frame",
    [
        _with(extra=1),  # a key not asked for
        {k: v for k, v in GOOD.items() if k != "count"},  # a key missing
        _with(maybe=None),  # an optional key of another type
        _with(op="y"),  # another literal
        _with(count=True),  # a bool is no int
        _with(count="3"),
        _with(count=11),  # out of range
        _with(ratio="2.0"),
        _with(ratio=False),
        _with(inner={"name": "abcde"}),  # oversized
        _with(inner={"name": "a", "other": 1}),  # an extra key, nested
        _with(pair=["a", 1, 2]),  # a tuple of another length
        _with(pair=["a", "1"]),
        _with(items=[1, "2"]),
        _with(items=(1, 2)),  # what no JSON parser makes
        _with(table={"k": 1}),
        _with(nothing=0),
        [GOOD],
        None,
    ],
)
def test_conform_refuses_anything_else(frame: object) -> None:
    with pytest.raises(Malformed):
        conform(frame, _Frame)


def _result(**changes: Any) -> dict[str, Any]:
    # What the agent answers, through its own encoder.
    header = {
        "op": "result",
        "exit_code": 0,
        "signal": None,
        "cpu": 0.01,
        "max_rss_kb": 9000,
        "wall": 0.02,
        "error": None,
        "timed_out": False,
        "output_exceeded": False,
        "collected": [["a.out", 0o755, 0]],
    }
    raw = encode_frame({**header, **changes}, [b"out", b"err", b"\x7fELF"])
    decoded: dict[str, Any] = protocol.decode_header(raw[4 : 4 + int.from_bytes(raw[:4], "big")])
    return decoded


def test_the_server_reads_the_agents_answers_as_their_types() -> None:
    assert protocol.read_result(_result(), 3)["collected"] == [["a.out", 0o755, 0]]
    assert protocol.read_result({"op": "error", "error": "box died", "blobs": []}, 0)["op"] == "error"
    run = {k: v for k, v in _result().items() if k not in ("op", "collected", "blobs")}
    results = {"op": "results", "results": [run, {**run, "forked": True}], "blobs": [1, 1, 1, 1]}
    assert len(protocol.read_results(results, 2, 4)["results"]) == 2
    ready = {"op": "ready", "pid": 7, "program_uid": 1000, "tools": {"gcc": "/usr/bin/gcc", "go": None}, "blobs": []}
    assert protocol.read_ready(ready)["tools"]["go"] is None


@pytest.mark.parametrize(
    "header, blobs",
    [
        (_result(verdict="AC"), 3),  # an extra key
        (_result(exit_code="0"), 3),  # a wrong type
        (_result(exit_code=256), 3),
        (_result(timed_out=0), 3),
        (_result(error="x" * (protocol.MAX_ERROR + 1)), 3),  # oversized
        (_result(), 4),  # blobs the header does not list
        (_result(collected=[["a.out", 0o755, 1]]), 3),  # a file's blob out of place
        (_result(collected=[["a.out", 0o755]]), 3),
        ({"op": "error", "error": "x", "blobs": [], "exit_code": 0}, 0),
        ({"op": "results", "results": [], "blobs": []}, 0),  # another answer than asked
    ],
)
def test_the_server_refuses_any_other_answer(header: dict[str, Any], blobs: int) -> None:
    with pytest.raises(Malformed):
        protocol.read_result(header, blobs)


def test_the_server_refuses_results_of_another_count_or_shape() -> None:
    run = {k: v for k, v in _result().items() if k not in ("op", "collected", "blobs")}
    with pytest.raises(Malformed):
        protocol.read_results({"op": "results", "results": [run], "blobs": [1, 1]}, 2, 2)
    with pytest.raises(Malformed):
        protocol.read_results({"op": "results", "results": [{**run, "more": True}], "blobs": [1, 1]}, 1, 2)
    with pytest.raises(Malformed):
        protocol.read_ready({"op": "ready", "pid": 7, "program_uid": 0, "tools": {"gcc": "/" * 5000}, "blobs": []})


class _CannedAgent(AgentWorker):
    """An agent whose channel answers one canned frame."""

    def __init__(self, answer: bytes) -> None:
        super().__init__(0, {"namespaces": True})
        self.answer = answer

    async def _open(self) -> None:
        self.reader = asyncio.StreamReader()
        self.reader.feed_data(self.answer)
        self.reader.feed_eof()

    def _write(self, data: bytes) -> None:
        pass

    async def _drain(self) -> None:
        pass


def _ask(answer: bytes) -> object:
    worker = _CannedAgent(answer)
    request = RunRequest(files={}, argv=["true"], env={}, limits={"wall_s": 1.0})  # type: ignore[typeddict-item]

    async def go() -> object:
        await worker._open()
        return await worker.run(request)

    return asyncio.run(go())


def test_an_agent_answer_of_another_shape_is_a_sandbox_fault() -> None:
    good = {k: v for k, v in _result(collected=[]).items() if k != "blobs"}
    assert _ask(encode_frame(good, [b"hi", b""])).stdout == b"hi"  # type: ignore[attr-defined]
    for bad in ({**good, "verdict": "AC"}, {**good, "exit_code": True}, {**good, "collected": [["x", 0o644, 0]]}):
        with pytest.raises(SandboxFault, match="not an answer"):
            _ask(encode_frame(bad, [b"hi", b""]))
    with pytest.raises(SandboxFault, match="not a frame"):
        _ask(b"\x00\x00\x00\x02[]")
    with pytest.raises(SandboxFault, match="not a frame"):
        _ask(b"\x7f\xff\xff\xff")  # a header larger than any frame's


def test_the_agent_reads_the_boxs_reports_as_their_types() -> None:
    report = {"exit_code": 0, "signal": None, "wall": 0.1, "cpu": 0.1, "max_rss_kb": 1, "error": None}
    assert box_protocol.read_run_report(json.dumps(report).encode()) == report
    series = {**report, "more": True}
    assert box_protocol.read_test_report(json.dumps(series).encode()) == series
    broken = {"more": False, "broken": True}
    assert box_protocol.read_test_report(json.dumps(broken).encode()) == broken
    for bad in ({**report, "more": True}, {**report, "signal": 0}, {**report, "error": "x" * 5000}, {}):
        with pytest.raises(Malformed):  # a ValueError: the agent answers an error frame (SE)
            box_protocol.read_run_report(json.dumps(bad).encode())
    for bad in ({**series, "broken": True}, {"more": True, "broken": True}, report):
        with pytest.raises(Malformed):
            box_protocol.read_test_report(json.dumps(bad).encode())


def test_a_series_report_of_another_shape_breaks_the_series() -> None:
    status = {"exit_code": 0, "signal": None, "cpu": 0.1, "max_rss_kb": 10}
    assert box_protocol.read_series_report(json.dumps(status).encode()) == status
    asserted = {**status, "supervisor": 5, "retired": False, "unparsed": False}
    assert box_protocol.read_series_report(json.dumps(asserted).encode()) == asserted
    unparsed = {**status, "unparsed": True}  # the series' process's own compile found the source does not compile
    assert box_protocol.read_series_report(json.dumps(unparsed).encode()) == unparsed
    for bad in (
        {"broken": True},  # says so
        {**status, "wall": 1.0},
        {**status, "supervisor": 5},  # half an assert status
        {**status, "supervisor": 5, "retired": False},  # one without the checker's word on the compile
        {**status, "unparsed": 1},
        {**status, "cpu": None},
        {**status, "exit_code": 300},
    ):
        assert box_protocol.read_series_report(json.dumps(bad).encode()) is None, bad
    assert box_protocol.read_series_report(b"\xff") is None
    assert box_protocol.read_series_report(b"[" * 100_000) is None


def test_a_checker_outcome_of_another_shape_breaks_the_series() -> None:
    assert typing.get_args(box_protocol.Outcome) == assert_outcome.OUTCOMES
    outcome = b'{"outcome":"passed","cpu":0.001000,"retired":false}'  # as the checker writes it
    assert box_protocol.read_outcome(outcome) == {"outcome": "passed", "cpu": 0.001, "retired": False}
    for bad in (
        {"outcome": "accepted", "cpu": 0.0, "retired": False},
        {"outcome": "passed", "cpu": 0.0, "retired": 0},
        {"outcome": "passed", "cpu": 0.0, "retired": False, "verdict": "AC"},
        {"outcome": "passed", "cpu": 0.0},
    ):
        assert box_protocol.read_outcome(json.dumps(bad).encode()) is None, bad
    assert box_protocol.read_outcome(b"") is None


def test_a_cell_answer_of_another_shape_ends_the_record() -> None:
    answer = {"display": [{"text/plain": "1"}], "error": [], "cut": False}
    body = json.dumps(answer).encode()
    record = cell_frames.read_record(b"cell 0 %d\n%s" % (len(body), body) + b"end 1 0\n", 1)
    assert record.finished and record.cells[0].display == [{"text/plain": "1"}]
    for bad in (
        {**answer, "n": 0},
        {"display": [{"text/plain": 1}], "error": [], "cut": False},
        {"display": [], "error": [{"ename": "E", "evalue": "v", "traceback": "t"}], "cut": False},
        {"display": [], "cut": False},
        {"display": [], "error": [], "cut": 0},
    ):
        body = json.dumps(bad).encode()
        record = cell_frames.read_record(b"cell 0 %d\n%s" % (len(body), body) + b"end 1 0\n", 1)
        assert not record.finished and not record.cells[0].answered, bad


def test_the_kernels_answer_is_read_as_its_type() -> None:
    answer = {
        "n": 0,
        "nonce": "ab",
        "source": None,
        "cell_timeout": 0.0,
        "timer": True,
        "stdin": None,
        "answer_bytes": 100,
        "display": [],
        "error": [],
        "cut": False,
    }
    assert cell_frames.read_kernel_answer(answer) == answer
    bads = ({**answer, "extra": 1}, {**answer, "cell_timeout": "0"}, {**answer, "n": False}, {**answer, "stdin": 1})
    bads += ({**answer, "timer": 1}, {**answer, "cut": 1}, {**answer, "answer_bytes": 1.5})
    for bad in bads:
        with pytest.raises(Malformed):
            cell_frames.read_kernel_answer(bad)
