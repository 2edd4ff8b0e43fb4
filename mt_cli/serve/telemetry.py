"""The server's Prometheus metrics (GET /metrics), in a registry of the app's own so that two
servers in one process (the tests) never share counts."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from mt_cli.serve.batcher import Job

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Telemetry:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "mt_requests",
            "HTTP requests by endpoint and status",
            ["endpoint", "status"],
            registry=r,
        )
        self.errors = Counter(
            "mt_errors", "Refused or failed requests by kind", ["kind"], registry=r
        )
        self.lines = Counter("mt_lines", "Lines decoded (translated, scored or drawn)", registry=r)
        self.src_tokens = Counter("mt_source_tokens", "Source tokens decoded", registry=r)
        self.out_tokens = Counter(
            "mt_output_tokens", "Output tokens of the best translations", registry=r
        )
        self.batch_lines = Histogram(
            "mt_batch_lines", "Lines per decoding batch", buckets=BATCH_BUCKETS, registry=r
        )
        self.batch_jobs = Histogram(
            "mt_batch_requests", "Requests per decoding batch", buckets=BATCH_BUCKETS, registry=r
        )
        self.queue_wait = Histogram(
            "mt_queue_wait_seconds",
            "Time a request waited for its batch",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.latency = Histogram(
            "mt_request_seconds",
            "Request latency by endpoint",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queued = Gauge("mt_queued_lines", "Lines waiting for the decoding thread", registry=r)
        # By limit only: a label per client would grow without bound.
        self.limited = Counter(
            "mt_limited",
            "Requests refused by a limit (requests, characters, cost)",
            ["limit"],
            registry=r,
        )
        self.cache_hits = Counter(
            "mt_cache_hits", "Texts answered from the translation cache", registry=r
        )
        self.cache_misses = Counter(
            "mt_cache_misses", "Texts the translation cache did not hold", registry=r
        )
        self._model_metrics(r)

    def _model_metrics(self, r: CollectorRegistry) -> None:
        # By model: a server holds as many as its folder, so the label stays bounded.
        self.model_requests = Counter(
            "mt_model_requests", "Requests answered by each model", ["model"], registry=r
        )
        self.model_loads = Counter(
            "mt_model_loads", "Times each model was loaded", ["model"], registry=r
        )
        self.model_unloads = Counter(
            "mt_model_unloads",
            "Times each model was unloaded for another (serve.max_loaded, max_memory_mb)",
            ["model"],
            registry=r,
        )
        self.loaded = Gauge("mt_models_loaded", "Models loaded now", registry=r)
        # a running batch's steps: mt_decoder_step_rows / mt_decoder_steps is its mean occupancy
        self.in_flight = Gauge(
            "mt_rows_in_flight", "Decoder rows (sentences x beam) running now", registry=r
        )
        self.steps = Counter("mt_decoder_steps", "Decoder steps of running batches", registry=r)
        self.step_rows = Counter(
            "mt_decoder_step_rows", "Decoder rows summed over those steps", registry=r
        )

    def step(self, rows: int) -> None:
        """A running batch's report of one decoder step over `rows` rows; 0 when it ends."""
        self.in_flight.set(rows)
        if rows:
            self.steps.inc()
            self.step_rows.inc(rows)

    def batch(self, jobs: list[Job], waited: list[float], seconds: float) -> None:
        """The batcher's report of one decoded batch."""
        self.batch_lines.observe(sum(job.lines for job in jobs))
        self.batch_jobs.observe(len(jobs))
        self.lines.inc(sum(job.lines for job in jobs))
        self.src_tokens.inc(sum(job.tokens for job in jobs))
        for w in waited:
            self.queue_wait.observe(w)

    def text(self) -> bytes:
        return generate_latest(self.registry)
