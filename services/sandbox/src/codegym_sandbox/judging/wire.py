"""A run's step in the native wire model: what the judge puts in an answer and the routes answer with."""

from __future__ import annotations

from ..executor import StepResult
from ..models import StepOut


def text(data: bytes) -> str:
    """A program's output as the wire carries it: UTF-8, with what does not decode replaced."""
    return data.decode("utf-8", errors="replace")


def step_out(step: StepResult) -> StepOut:
    """One compile or run step of ``/v1`` answers."""
    return StepOut(
        verdict=step.end.verdict,  # a step's own: no test judges it here
        exit_code=step.exit_code,
        signal=step.signal,
        wall_s=step.wall_s,
        cpu_s=step.cpu_s,
        max_rss_kb=step.max_rss_kb,
        stdout=text(step.stdout),
        stderr=text(step.stderr),
        output_truncated=step.output_exceeded,
        cached=step.cached,
        error=step.error,
    )
