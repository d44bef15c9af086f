"""Fill-in-the-middle rows from reference solutions: spans inside function bodies, chosen by complexity
metrics (``metrics``, ``spans``), masked by ``CodeMaskDataset`` and verified in the sandbox (``verify``).
``codegym-data mask`` is the command line (``cli``)."""

from __future__ import annotations

from .dataset import CodeMaskDataset, MaskRow, UnknownMetric, parse_metric_values
from .fim import FIM_FORMATS, format_row
from .metrics import METRICS, FunctionMetrics, Halstead, Metrics, function_metrics, measure
from .report import MaskReport
from .spans import FunctionSpans, Span, function_spans
from .verify import MaskRun, blank_fill, judge_fills, mask_and_verify, read_rows, reassemble, verify_fill

__all__ = [
    "FIM_FORMATS",
    "METRICS",
    "CodeMaskDataset",
    "FunctionMetrics",
    "FunctionSpans",
    "Halstead",
    "MaskReport",
    "MaskRow",
    "MaskRun",
    "Metrics",
    "Span",
    "UnknownMetric",
    "blank_fill",
    "format_row",
    "function_metrics",
    "function_spans",
    "judge_fills",
    "mask_and_verify",
    "measure",
    "parse_metric_values",
    "read_rows",
    "reassemble",
    "verify_fill",
]
