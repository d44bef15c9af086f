"""Prometheus metrics of one server (its own registry, so several apps can live in one process)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .cache import LRUCache

_LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "codegym_sandbox_requests", "HTTP requests by route and status code", ["route", "status"], registry=r
        )
        self.runs = Counter(
            "codegym_sandbox_runs", "Sandboxed runs by language and verdict", ["language", "verdict"], registry=r
        )
        self.run_seconds = Histogram(
            "codegym_sandbox_run_seconds",
            "Latency of one sandboxed step",
            ["language", "kind"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.forked_runs = Counter(
            "codegym_sandbox_forked_runs",
            "Runs of a program's test forked from its compiled program (a test series), not started afresh",
            registry=r,
        )
        self.cache = Counter("codegym_sandbox_cache", "Result cache lookups by result", ["result"], registry=r)
        self.cache_bytes = Gauge(
            "codegym_sandbox_cache_bytes",
            "Bytes held by a result cache (steps, or whole answers)",
            ["store"],
            registry=r,
        )
        self.cache_entries = Gauge(
            "codegym_sandbox_cache_entries",
            "Entries of a result cache (steps, or whole answers)",
            ["store"],
            registry=r,
        )
        self.abandoned = Counter(
            "codegym_sandbox_abandoned_requests", "Requests whose client went away before the answer", registry=r
        )
        self.cancelled_runs = Counter(
            "codegym_sandbox_cancelled_runs",
            "Runs cancelled before their end because their client went away: dropped from the queue, or "
            "stopped on their worker (which is then replaced)",
            registry=r,
        )
        self.dropped_connections = Counter(
            "codegym_sandbox_dropped_connections",
            "Connections dropped by reason: deadline, crowded (too many waited for a request head: the longest-"
            "waiting closed), head_too_large (a head, or a chunked body's framing and trailers, past 64 KiB), "
            "pipelined (a request head before the answer to the one before it: that answer was the last), "
            "body_deadline (a body slower than MIN_BODY_RATE_KIB_S), send_stalled (a client that took none of its "
            "answer for SEND_STALL_S), unsent_bytes (answers waiting for their clients held more than MAX_UNSENT_MB: "
            "the slowest readers reset first, new answers only past half of it)",
            ["reason"],
            registry=r,
        )
        self.rejected = Counter("codegym_sandbox_rejected", "Runs refused because the queue was full", registry=r)
        self.queue_depth = Gauge("codegym_sandbox_queue_depth", "Runs waiting for a worker", registry=r)
        self.busy_workers = Gauge("codegym_sandbox_busy_workers", "Workers running a program", registry=r)
        self.workers = Gauge("codegym_sandbox_workers", "Worker slots", registry=r)
        self.sessions = Gauge("codegym_sandbox_sessions_active", "Sessions held now", registry=r)
        self.session_memory = Gauge(
            "codegym_sandbox_sessions_memory_mb", "Memory the sessions held now may use (their limits)", registry=r
        )
        self.sessions_warm = Gauge("codegym_sandbox_sessions_warm", "Session kernels started ahead", registry=r)
        self.sessions_created = Counter(
            "codegym_sandbox_sessions_created", "Sessions made (a fork's copies too)", registry=r
        )
        self.session_forks = Counter("codegym_sandbox_session_forks", "Sessions forked", registry=r)
        self.sessions_ended = Counter(
            "codegym_sandbox_sessions_ended",
            "Sessions ended, by cause: deleted, expired, time_limit, memory_limit, killed (their interpreter ended "
            "otherwise), stopped (with the server)",
            ["cause"],
            registry=r,
        )
        self.session_cells = Counter(
            "codegym_sandbox_session_cells", "Cells run in sessions, by status", ["status"], registry=r
        )

    def track_cache(self, store: str, cache: LRUCache[Any]) -> None:
        self.cache_bytes.labels(store=store).set_function(lambda: cache.nbytes)
        self.cache_entries.labels(store=store).set_function(lambda: len(cache))

    def track_sessions(
        self, active: Callable[[], float], memory_mb: Callable[[], float], warm: Callable[[], float]
    ) -> None:
        self.sessions.set_function(active)
        self.session_memory.set_function(memory_mb)
        self.sessions_warm.set_function(warm)

    def track_pool(self, queued: Callable[[], float], busy: Callable[[], float], size: int) -> None:
        self.queue_depth.set_function(queued)
        self.busy_workers.set_function(busy)
        self.workers.set(size)
