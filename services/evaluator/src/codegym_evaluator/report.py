"""What a run leaves behind: a table on the terminal, ``summary.json``, ``report.md`` and a PNG of pass rates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .evaluate import EvalSummary
from .tasks.model import PUBLIC_TESTS
from .turn_stats import TurnsSummary

PLOT = "pass_rates.png"
TURNS_PLOT = "pass_by_turn.png"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _rows(summary: EvalSummary) -> tuple[list[str], list[list[str]]]:
    groups = ["all", *summary.per_difficulty]
    rows = []
    for k in summary.ks:
        cells = [_fmt(summary.pass_at_k.get(k))] + [_fmt(summary.per_difficulty[d].get(k)) for d in groups[1:]]
        rows.append([f"pass@{k}", *cells])
    return ["metric", *groups], rows


def _turn_rows(turns: TurnsSummary) -> tuple[list[str], list[list[str]]]:
    header = ["turn", "pass@1", "samples", "answered again", "fixed", "fix rate", "SE"]
    rows = [
        [
            str(t.turn),
            _fmt(t.pass_at_1),
            str(t.known),
            *(("-", "-", "-") if t.turn == 1 else (str(t.asked), str(t.fixed), _fmt(t.fix_rate))),
            str(t.sandbox_errors),
        ]
        for t in turns.by_turn
    ]
    return header, rows


def summary_table(summary: EvalSummary, title: str = "", turns: TurnsSummary | None = None) -> str:
    """A plain-text table: pass@k (overall and per difficulty), verdict counts and sandbox errors; with
    ``turns``, pass@1 after each turn of feedback."""
    header, rows = _rows(summary)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join
    out = [title] if title else []
    out.append(f"{len(summary.per_task)} tasks, {summary.samples} samples")
    out.append(line(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    out += [line(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    out.append("verdicts: " + (", ".join(f"{v} {c}" for v, c in summary.verdict_counts.items()) or "none"))
    if turns is not None:
        header, rows = _turn_rows(turns)
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        out.append("after each turn of feedback:")
        out += [line(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]]
    if summary.sandbox_errors:
        out.append(
            f"sandbox errors: {summary.sandbox_errors} samples were not judged (not counted as failures); "
            "run again with the same --output to retry them"
        )
    return "\n".join(out)


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def write_plot(summary: EvalSummary, path: Path) -> str | None:
    """A bar chart of pass@k per difficulty and of verdict counts; None, or why it could not be drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install 'codegym-evaluator[report]')"
    groups = ["all", *summary.per_difficulty]
    values = {"all": summary.pass_at_k, **summary.per_difficulty}
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), width_ratios=[3, 2])
    width = 0.8 / max(1, len(summary.ks))
    for j, k in enumerate(summary.ks):
        xs = [i + j * width for i in range(len(groups))]
        left.bar(xs, [100 * values[g].get(k, 0.0) for g in groups], width, label=f"pass@{k}")
    left.set_xticks([i + width * (len(summary.ks) - 1) / 2 for i in range(len(groups))], groups)
    left.set_ylabel("% of tasks")
    left.set_ylim(0, 100)
    left.legend()
    left.set_title("pass@k")
    verdicts = list(summary.verdict_counts)
    right.bar(verdicts, [summary.verdict_counts[v] for v in verdicts], color="gray")
    right.set_title("verdicts of all samples")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


def write_turns_plot(turns: TurnsSummary, path: Path) -> str | None:
    """A line of pass@1 by turn; None, or why it could not be drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install 'codegym-evaluator[report]')"
    points = [(t.turn, 100 * t.pass_at_1) for t in turns.by_turn if t.pass_at_1 is not None]
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.plot([p[0] for p in points], [p[1] for p in points], marker="o")
    ax.set_xticks(range(1, turns.max_turns + 1))
    ax.set_xlabel("turn (1: the first answer)")
    ax.set_ylabel("pass@1, % (solved by this turn)")
    ax.set_ylim(0, 100)
    ax.set_title("pass@1 after each turn of feedback")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


def _turns_section(out: Path, turns: TurnsSummary, info: dict[str, Any]) -> list[str]:
    feedback = turns.feedback
    md = ["## Turns of feedback", ""]
    md += [
        f"After a wrong answer the model read what its program did on the tests it may see, and answered again "
        f"(up to {turns.max_turns} answers); each answer was judged on all the task's tests. pass@1 after turn t: "
        "the share of samples solved by then (mean over tasks); *answered again*: the samples that had failed "
        "before this turn, *fixed*: those whose new answer passed.",
        "",
        _markdown_table(*_turn_rows(turns)),
        "",
        f"Mean answers a sample used: {_num(turns.mean_turns_used)}. Feedback showed public tests for "
        f"{feedback.get('tasks_shown_public_tests', 0)} tasks; for {feedback.get('tasks_shown_judging_tests', 0)} "
        f"tasks without a public/private split it showed the first {info.get('public_tests', PUBLIC_TESTS)} of "
        "the tests that also judge the answer, always leaving one hidden.",
        "",
    ]
    problem = write_turns_plot(turns, out / TURNS_PLOT)
    return [*md, f"![pass@1 by turn]({TURNS_PLOT})" if problem is None else f"_{problem}_", ""]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def write_report(
    out_dir: str | Path,
    summary: EvalSummary,
    info: dict[str, Any],
    error: str | None = None,
    turns: TurnsSummary | None = None,
) -> Path:
    """Write ``summary.json``, ``report.md`` and the plots into ``out_dir``; the report's path. ``summary`` is
    of the first answers; ``turns``, pass@1 after each turn of feedback (``--turns``)."""
    out = Path(out_dir)
    data = {"run": info, **summary.to_dict(), "stopped_early": error}
    if turns is not None:
        data["turns"] = turns.to_dict()
    (out / "summary.json").write_text(json.dumps(data, indent=2) + "\n")
    plot_problem = write_plot(summary, out / PLOT)
    header, rows = _rows(summary)
    md = [f"# Evaluation: {info.get('dataset', '')}", ""]
    md += [f"- {k}: `{v}`" for k, v in info.items() if v not in (None, [], "")]
    md += ["", f"{len(summary.per_task)} tasks, {summary.samples} samples.", ""]
    if error:
        md += [f"**The run stopped early:** {error}. Results so far are below; run again to resume.", ""]
    md += ["## pass@k", "", _markdown_table(header, rows), ""]
    md += [f"![pass rates]({PLOT})" if plot_problem is None else f"_{plot_problem}_", ""]
    if turns is not None:
        md += _turns_section(out, turns, info)
    md += [
        "## Verdicts",
        "",
        _markdown_table(["verdict", "samples"], [[v, str(c)] for v, c in summary.verdict_counts.items()]),
    ]
    md += ["", f"Sandbox errors (not judged, not counted as failures): {summary.sandbox_errors}.", ""]
    md += ["## Tasks", ""]
    task_rows = [
        [
            r.task_id,
            r.difficulty or "",
            str(r.n),
            str(r.correct),
            str(r.sandbox_errors),
            ", ".join(f"{v} {c}" for v, c in sorted(r.to_dict(summary.ks)["verdicts"].items())),
        ]
        for r in summary.per_task.values()
    ]
    md += [_markdown_table(["task", "difficulty", "judged", "correct", "SE", "verdicts"], task_rows), ""]
    path = out / "report.md"
    path.write_text("\n".join(md))
    return path
