"""What the pages read: probe runs and scrapes of one server over a time range, statuses, baselines.

Every query is one server over a window, which is what the collectors' indexes are built for. Scrapes are
downsampled in the database (`scrape_buckets`: GROUP BY a time bucket, Postgres `date_bin`, an SQLite
equivalent for the embedded default); ranges of days read the hourly rollups (collectors/rollups.py), so a
30-day window aggregates 720 rows per server instead of 172 800 and moves a few hundred to Python.
Probe runs (one an hour by default: 720 in 30 days) are read as slim values, the few JSON keys the charts
need extracted by the database, and thinned to the newest run per chart bucket beyond MAX_RUN_POINTS.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Exists, Max, OuterRef, QuerySet, Subquery, Sum
from django.db.models.fields.json import KT
from django.utils import timezone

from collectors.models import ProbeRun, Scrape, Server
from collectors.rollups import AVERAGED, TimeBucket, scrape_sums

MAX_RUNS = 2000
MAX_RUN_POINTS = 400  # more succeeded runs than this in a window: one per time bucket is drawn
SPARK_POINTS = 30
# Draft-budget keys by server kind (bundled engine, SGLang, vLLM), in the order budget_label prefers them.
BUDGET_KEYS = ("budget", "speculative_num_draft_tokens", "num_speculative_tokens")
SLIM_FINGERPRINT = ("kind", "model", "model__name", "version", "hash") + tuple(f"speculative__{k}" for k in BUDGET_KEYS)
ROLLUP_S = 3600
ROLLUP_FIELDS = ["n", "generation_tokens", "window_s"] + [f"{n}_{s}" for n, _ in AVERAGED for s in ("sum", "n")]
QUIET_INTERVALS = 3  # a server is "quiet" after this many scrape intervals without a scrape
BASELINE_RUNS = 10
ACTIVE = (ProbeRun.Status.QUEUED, ProbeRun.Status.RUNNING)


def decode_by_context(run: ProbeRun | RunPoint) -> dict[int, float]:
    """{context: median decode tok/s} of a run's two-point measurements, from its stored summary."""
    table = (run.summary or {}).get("decode_by_context") or {}
    return {int(k): v["median"] for k, v in sorted(table.items(), key=lambda kv: int(kv[0])) if v.get("median")}


def decode_by_output(run: ProbeRun | RunPoint) -> dict[int, float]:
    table = (run.summary or {}).get("decode_by_output") or {}
    return {int(k): v["median"] for k, v in sorted(table.items(), key=lambda kv: int(kv[0])) if v.get("median")}


def run_tau(run: ProbeRun | RunPoint) -> float | None:
    # The server's own counters when it has them; τ from response fields otherwise.
    return run.tau_counters if run.tau_counters is not None else run.tau_responses


@dataclass(slots=True)
class RunPoint:
    """What the charts read of a succeeded probe run (a slim, read-only stand-in for the ProbeRun row)."""

    pk: int
    finished_at: datetime
    summary: dict[str, Any] | None
    tau_counters: float | None
    tau_responses: float | None
    fingerprint: dict[str, Any]
    acceptance: dict[str, Any]


def run_bucket(server: Server, since: datetime, until: datetime, bucket_s: int) -> int | None:
    """`bucket_s` when the window holds more succeeded runs than a chart should draw (MAX_RUN_POINTS), so
    `succeeded_runs` keeps one run per bucket; None when every run is drawn."""
    count = server.probe_runs.filter(status=ProbeRun.Status.SUCCEEDED, finished_at__gte=since,
                                     finished_at__lte=until).count()
    return bucket_s if count > MAX_RUN_POINTS else None


def succeeded_runs(server: Server, since: datetime, until: datetime | None = None,
                   bucket_s: int | None = None) -> list[RunPoint]:
    """Succeeded runs in the window, oldest first, slimmed for the charts.

    A stored fingerprint carries the server's whole /server_info and the acceptance block every counter; a
    30-day window holds 720 runs, and decoding those documents and building model instances was most of
    the page's time. So the database extracts the few keys the charts read (`fingerprint_label`,
    `budget_label`, the rate) and the rows come back as plain values; `full_run` reads one whole row.
    With `bucket_s` (see `run_bucket`), the database keeps the newest run of each time bucket."""
    qs = server.probe_runs.filter(status=ProbeRun.Status.SUCCEEDED, finished_at__gte=since)
    if until is not None:
        qs = qs.filter(finished_at__lte=until)
    if bucket_s is not None:
        newest = qs.annotate(bucket=TimeBucket("finished_at", bucket_s)).values("bucket").annotate(
            newest=Max("id")).values("newest")
        qs = qs.filter(pk__in=Subquery(newest))
    slim = {f"fp_{k.replace('__', '_')}": KT(f"fingerprint__{k}") for k in SLIM_FINGERPRINT}
    rows = qs.order_by("-finished_at").values(
        "pk", "finished_at", "summary", "tau_counters", "tau_responses",
        rate=KT("acceptance__acceptance_rate"), **slim,
    )[:MAX_RUNS]
    runs = []
    for row in reversed(rows):
        fp = {k: row[f"fp_{k.replace('__', '_')}"] for k in SLIM_FINGERPRINT}
        runs.append(RunPoint(
            row["pk"], row["finished_at"], row["summary"], row["tau_counters"], row["tau_responses"],
            fingerprint={"kind": fp["kind"], "model": fp["model__name"] or fp["model"], "version": fp["version"],
                         "hash": fp["hash"], "speculative": {k: fp[f"speculative__{k}"] for k in BUDGET_KEYS
                                                             if fp[f"speculative__{k}"] is not None}},
            acceptance={"acceptance_rate": float(row["rate"]) if row["rate"] is not None else None},
        ))
    return runs


def full_run(run: RunPoint | None) -> ProbeRun | None:
    """The whole row of a (slimmed) run."""
    return ProbeRun.objects.get(pk=run.pk) if run is not None else None


def sampled_runs(since: datetime, until: datetime, points: int = SPARK_POINTS) -> dict[int, list[ProbeRun]]:
    """Every server's succeeded runs in the window, one per time bucket (at most about `points`), oldest
    first: the fleet's trend lines. The database picks the runs (the newest of each server and bucket), so
    a 30-day fleet moves ~600 rows, not 14 000."""
    step = max(int((until - since).total_seconds() / points), 60)
    chosen = (ProbeRun.objects.filter(status=ProbeRun.Status.SUCCEEDED, finished_at__gte=since, finished_at__lte=until)
              .annotate(bucket=TimeBucket("finished_at", step)).values("server_id", "bucket")
              .annotate(newest=Max("id")).values("newest"))
    out: dict[int, list[ProbeRun]] = {}
    for run in (ProbeRun.objects.filter(pk__in=Subquery(chosen)).order_by("finished_at")
                .only("server_id", "finished_at", "summary")):
        out.setdefault(run.server_id, []).append(run)
    return out


@dataclass(frozen=True)
class ScrapeBucket:
    """Good scrapes of one time bucket, aggregated by the database."""

    at: datetime  # bucket start
    n: int
    tau: float | None  # mean of the windows' τ
    acceptance_rate: float | None
    running: float | None
    waiting: float | None
    kv_usage: float | None
    generation_tps: float | None  # Σ generated tokens / Σ window seconds: exact over the bucket


def _bucket_rows(rows: Any, into: dict[datetime, dict[str, float]]) -> None:
    # Sums and counts add up, so a bucket split between rollups and raw scrapes merges exactly.
    for row in rows:
        bucket = into.setdefault(row.pop("bucket"), {})
        for key, value in row.items():
            if value is not None:
                bucket[key] = bucket.get(key, 0.0) + value


def _mean(sums: dict[str, float], name: str) -> float | None:
    return sums[f"{name}_sum"] / sums[f"{name}_n"] if sums.get(f"{name}_n") else None


def scrape_buckets(server: Server, since: datetime, until: datetime, bucket_s: int) -> list[ScrapeBucket]:
    """Good scrapes in [since, until], downsampled to `bucket_s` buckets in the database, oldest first.

    Buckets of an hour or more read the hourly rollups up to the newest hour rolled for this server, and
    raw scrapes only after it (collectors/rollups.py); finer buckets read raw scrapes."""
    sums: dict[datetime, dict[str, float]] = {}
    raw_from = since
    if bucket_s >= ROLLUP_S:
        newest = server.scrape_rollups.filter(hour__gte=since, hour__lte=until).aggregate(h=Max("hour"))["h"]
        if newest is not None:
            rolled = server.scrape_rollups.filter(hour__gte=since, hour__lte=newest)
            _bucket_rows(rolled.annotate(bucket=TimeBucket("hour", bucket_s)).values("bucket").annotate(
                **{f: Sum(f) for f in ROLLUP_FIELDS}).order_by(), sums)
            raw_from = max(since, newest + timedelta(seconds=ROLLUP_S))
    raw = Scrape.objects.filter(server=server, ok=True, at__gte=raw_from, at__lte=until)
    _bucket_rows(raw.annotate(bucket=TimeBucket("at", bucket_s)).values("bucket").annotate(**scrape_sums())
                 .order_by(), sums)
    return [ScrapeBucket(at, int(s.get("n", 0)), _mean(s, "tau"), _mean(s, "rate"), _mean(s, "running"),
                         _mean(s, "waiting"), _mean(s, "kv"),
                         s["generation_tokens"] / s["window_s"] if s.get("generation_tokens") is not None
                         and s.get("window_s") else None)
            for at, s in sorted(sums.items())]


def per_position_rates(server: Server, since: datetime, until: datetime) -> dict[int, float]:
    """{position: accepted at that position per verify step} over the window, from the counter totals of its
    first and last good scrapes (engine_client's window arithmetic: a restart counts from the restart)."""
    from collectors.scraping import snapshot_from_totals
    from engine_client.metrics import window

    good = (server.scrapes.filter(ok=True, totals__isnull=False, at__gte=since, at__lte=until)
            .only("server_id", "totals", "at"))
    first, last = good.order_by("at").first(), good.order_by("-at").first()
    if first is None or last is None or first.pk == last.pk:
        return {}
    return dict(sorted(window(snapshot_from_totals(first.totals), snapshot_from_totals(last.totals))
                       .per_position_rate.items()))


def last_data_at(server: Server) -> datetime | None:
    """When the last scrape or probe of this server landed (what "last refreshed" refers to)."""
    scrape = server.scrapes.aggregate(at=Max("at"))["at"]
    run = server.probe_runs.filter(status=ProbeRun.Status.SUCCEEDED).aggregate(at=Max("finished_at"))["at"]
    return max((t for t in (scrape, run) if t is not None), default=None)


def latest_run(server: Server) -> ProbeRun | None:
    return server.probe_runs.filter(status=ProbeRun.Status.SUCCEEDED).order_by("-finished_at").first()


def active_manual_run(server: Server) -> ProbeRun | None:
    return server.probe_runs.filter(trigger=ProbeRun.Trigger.MANUAL, status__in=ACTIVE).order_by("-queued_at").first()


def quiet_after(server: Server) -> timedelta:
    # At least two minutes: a beat tick or a busy worker can delay one scrape by a minute.
    return timedelta(seconds=max(QUIET_INTERVALS * server.scrape_interval_s, 120))


def status_of(server: Server, probing: bool, scraped_at: datetime | None, scrape_ok: bool | None) -> str:
    """probing | up | down | quiet (no scrape for QUIET_INTERVALS intervals) | unknown (never scraped)."""
    if probing:
        return "probing"
    if scraped_at is None:
        return "unknown"
    if timezone.now() - scraped_at > quiet_after(server):
        return "quiet"
    return "up" if scrape_ok else "down"


def status(server: Server, latest_scrape: Scrape | None) -> str:
    probing = server.probe_runs.filter(status=ProbeRun.Status.RUNNING).exists()
    return status_of(server, probing, latest_scrape.at if latest_scrape else None,
                     latest_scrape.ok if latest_scrape else None)


def fleet_servers() -> list[Server]:
    """Every server with what its fleet row needs, in one query (correlated subqueries on the per-server
    indexes): the latest scrape's time and outcome, the latest τ/rate, whether a probe is running, and the
    latest succeeded run (as `latest_run`, fetched with one more query for all servers)."""
    scrapes = Scrape.objects.filter(server=OuterRef("pk")).order_by("-at")
    with_tau = scrapes.filter(ok=True, tau__isnull=False)
    succeeded = ProbeRun.objects.filter(server=OuterRef("pk"), status=ProbeRun.Status.SUCCEEDED)
    servers = list(Server.objects.annotate(
        scraped_at=Subquery(scrapes.values("at")[:1]), scrape_ok=Subquery(scrapes.values("ok")[:1]),
        tau=Subquery(with_tau.values("tau")[:1]), acceptance_rate=Subquery(with_tau.values("acceptance_rate")[:1]),
        probing=Exists(ProbeRun.objects.filter(server=OuterRef("pk"), status=ProbeRun.Status.RUNNING)),
        latest_run_id=Subquery(succeeded.order_by("-finished_at").values("pk")[:1]),
    ))
    runs = ProbeRun.objects.only("pk", "server_id", "finished_at", "summary", "fingerprint", "tau_counters",
                                 "tau_responses").in_bulk([s.latest_run_id for s in servers if s.latest_run_id])
    for server in servers:
        server.latest_run = runs.get(server.latest_run_id)  # type: ignore[attr-defined]
    return servers


def quiet_notice(server: Server, scraped_at: datetime | None) -> str:
    """A plain sentence when the server has gone quiet (nothing scraped for too long), else ""."""
    if not server.enabled:
        return f"{server.name} is disabled: it is neither scraped nor probed."
    if scraped_at is None:
        return f"{server.name} has never been scraped yet."
    silent = timezone.now() - scraped_at
    if silent <= quiet_after(server):
        return ""
    minutes = int(silent.total_seconds() // 60)
    ago = f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"
    return (f"{server.name} has gone quiet: no scrape for {ago} (expected every {server.scrape_interval_s} s). "
            "Is the worker or beat running, and is the server reachable?")


def budget_label(fingerprint: Any) -> str:
    """The draft budget a run's acceptance rate depends on, as the server reported it ("B=64"), or ""."""
    spec = fingerprint.get("speculative") if isinstance(fingerprint, dict) else None
    if not isinstance(spec, dict):
        return ""
    for key, name in zip(BUDGET_KEYS, ("B", "draft tokens", "k"), strict=True):
        if spec.get(key) is not None:
            return f"{name}={spec[key]}"
    return ""


def budget_value(fingerprint: Any) -> int | None:
    label = budget_label(fingerprint)
    value = label.partition("=")[2]
    return int(value) if value.isdigit() else None


@dataclass(frozen=True)
class Baseline:
    median: float
    mad: float
    n: int


def baselines(run: ProbeRun, n: int = BASELINE_RUNS) -> dict[int, Baseline]:
    """Per context: median ± MAD of the last n clean succeeded runs before this one."""
    earlier: QuerySet[ProbeRun] = ProbeRun.objects.filter(
        server_id=run.server_id, status=ProbeRun.Status.SUCCEEDED, contaminated=False
    ).exclude(pk=run.pk)
    if run.finished_at:
        earlier = earlier.filter(finished_at__lt=run.finished_at)
    points: dict[int, list[float]] = {}
    for other in earlier.order_by("-finished_at").only("summary")[:n]:
        for context, value in decode_by_context(other).items():
            points.setdefault(context, []).append(value)
    out = {}
    for context, values in points.items():
        med = statistics.median(values)
        out[context] = Baseline(med, statistics.median(abs(v - med) for v in values), len(values))
    return out


def diff_lines(run: ProbeRun) -> list[str]:
    """'decode tok/s at 3072: 112.4, baseline 115.0 ± 1.2, −2.3 %' for each probed context."""
    base = baselines(run)
    lines = []
    for context, value in decode_by_context(run).items():
        b = base.get(context)
        if b is None:
            lines.append(f"decode tok/s at {context}: {value:.1f}, no baseline yet")
            continue
        change = (value - b.median) / b.median * 100 if b.median else 0.0
        sign = "−" if change < 0 else "+"
        lines.append(f"decode tok/s at {context}: {value:.1f}, baseline {b.median:.1f} ± {b.mad:.1f}, "
                     f"{sign}{abs(change):.1f} %")
    return lines


def fingerprint_label(fingerprint: Any) -> str:
    """A short, human label of a server fingerprint for hovers and tables."""
    if not isinstance(fingerprint, dict):
        return ""
    model = fingerprint.get("model")
    if isinstance(model, dict):  # the bundled engine reports {name, sha256}
        model = model.get("name")
    parts = [str(p) for p in (fingerprint.get("kind"), model, fingerprint.get("version")) if p]
    if fingerprint.get("hash"):
        parts.append(f"#{str(fingerprint['hash'])[:8]}")
    return " · ".join(parts)[:160]
