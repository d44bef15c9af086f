"""What a run leaves behind: a table on the terminal, ``summary.json``, ``report.md`` and a PNG of pass rates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .evaluate import EvalSummary

PLOT = "pass_rates.png"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _rows(summary: EvalSummary) -> tuple[list[str], list[list[str]]]:
    groups = ["all", *summary.per_difficulty]
    rows = []
    for k in summary.ks:
        cells = [_fmt(summary.pass_at_k.get(k))] + [_fmt(summary.per_difficulty[d].get(k)) for d in groups[1:]]
        rows.append([f"pass@{k}", *cells])
    return ["metric", *groups], rows


def summary_table(summary: EvalSummary, title: str = "") -> str:
    """A plain-text table: pass@k (overall and per difficulty), verdict counts and sandbox errors."""
    header, rows = _rows(summary)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join
    out = [title] if title else []
    out.append(f"{len(summary.per_task)} tasks, {summary.samples} samples")
    out.append(line(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    out += [line(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    out.append("verdicts: " + (", ".join(f"{v} {c}" for v, c in summary.verdict_counts.items()) or "none"))
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


def write_report(out_dir: str | Path, summary: EvalSummary, info: dict[str, Any], error: str | None = None) -> Path:
    """Write ``summary.json``, ``report.md`` and the plot into ``out_dir``; the report's path."""
    out = Path(out_dir)
    data = {"run": info, **summary.to_dict(), "stopped_early": error}
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
