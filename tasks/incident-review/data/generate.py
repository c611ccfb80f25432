"""Generate the incident-review data set (deterministic: fixed seed). Run: python data/generate.py

The story the data tells, for maintainers only (this script is not seeded into run workspaces):
payment-api, 2026-09-02 20:00-23:00 (+08:00). At 21:02 the nightly `ledger-reconcile` batch job starts
and holds ~34 of the 40 database pool connections until a DBA stops it at 22:24. The API's requests wait
for a connection: pool stats show active == max and a waiting queue; p99 latency goes from ~190 ms to
2-3 s; the gateway logs 504s whose message is a pool-acquire timeout. Red herring: the checkout-web
frontend release at 20:56, six minutes before onset; rolling it back at 21:35 changes nothing. The gateway
log shipper restarted at 22:14, so logs for 22:14:00-22:16:00 are missing while the metrics go on.
"""

from __future__ import annotations

import csv
import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

SEED = 20260902
TZ = timezone(timedelta(hours=8))
START = datetime(2026, 9, 2, 20, 0, tzinfo=TZ)
MINUTES = 180
BATCH_START, BATCH_END = 62, 144  # minute offsets: 21:02 and 22:24
POOL_MAX = 40
LOG_GAP = (datetime(2026, 9, 2, 22, 14, tzinfo=TZ), datetime(2026, 9, 2, 22, 16, tzinfo=TZ))
MISSING_IDLE_MINUTE = 107  # 21:47: the pool collector dropped one field
HERE = Path(__file__).resolve().parent


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="seconds")


def _batch_held(m: int) -> int:
    if BATCH_START <= m < BATCH_END:
        return min(34, 12 * (m - BATCH_START + 1))
    return 0


def generate(out: Path = HERE) -> None:
    rng = random.Random(SEED)
    metrics, pool, logs = [], [], []
    trace = 0
    for m in range(MINUTES):
        t = START + timedelta(minutes=m)
        requests = int(rng.gauss(310, 12))
        held = _batch_held(m)
        api_need = max(7, int(rng.gauss(11, 2)))
        starved = held + api_need > POOL_MAX
        active = min(POOL_MAX, held + api_need)
        waiting = max(0, held + api_need - POOL_MAX + int(rng.gauss(14, 4))) if starved else 0
        if starved:
            p50, p95, p99 = rng.gauss(110, 15), rng.gauss(1250, 150), rng.gauss(2500, 250)
            errors = max(3, int(rng.gauss(9, 2.5)))
        else:
            p50, p95, p99 = rng.gauss(45, 3), rng.gauss(120, 8), rng.gauss(190, 12)
            errors = 1 if rng.random() < 0.15 else 0
        metrics.append(
            {
                "ts": _iso(t),
                "requests": requests,
                "p50_ms": round(p50),
                "p95_ms": round(p95),
                "p99_ms": round(p99),
                "errors_5xx": errors,
            }
        )
        pool.append(
            {
                "ts": _iso(t),
                "pool_max": POOL_MAX,
                "active": active,
                "idle": "" if m == MISSING_IDLE_MINUTE else POOL_MAX - active,
                "waiting": waiting,
                "held_by_batch": held,
                "top_holder": "ledger-reconcile" if held else "payment-api",
            }
        )
        # Error lines: all of them; plus two sampled successful requests per minute (one per 30 s slot).
        lines = []
        for _ in range(errors):
            sec = rng.uniform(0, 60)
            if starved:
                lines.append((sec, 504, 3000 + rng.randint(2, 60), "db pool acquire timeout after 3000ms"))
            else:
                lines.append((sec, 502, rng.randint(800, 2000), "card network connection reset"))
        for slot in range(2):
            sec = slot * 30 + rng.uniform(0.5, 29.5)
            latency = rng.randint(60, 2400) if starved else rng.randint(25, 210)
            lines.append((sec, 200, latency, "ok"))
        for sec, status, latency, msg in sorted(lines):
            at = t + timedelta(seconds=sec)
            trace += 1
            if LOG_GAP[0] <= at < LOG_GAP[1]:
                continue
            logs.append(
                {
                    "ts": at.isoformat(timespec="milliseconds"),
                    "status": status,
                    "latency_ms": latency,
                    "msg": msg,
                    "trace_id": f"t{trace:06d}",
                }
            )
    releases = [
        {
            "id": "REL-2288",
            "ts": "2026-09-02T14:10:00+08:00",
            "service": "payment-api",
            "kind": "backend",
            "version": "3.8.1",
            "change": "retry card-network resets once; log format unchanged",
            "by": "deploy-bot",
        },
        {
            "id": "REL-2291",
            "ts": "2026-09-02T20:56:00+08:00",
            "service": "checkout-web",
            "kind": "frontend",
            "version": "2.14.0",
            "change": "new payment form layout and styles (static bundle only)",
            "by": "deploy-bot",
        },
        {
            "id": "REL-2292",
            "ts": "2026-09-02T21:35:00+08:00",
            "service": "checkout-web",
            "kind": "rollback",
            "version": "2.13.4",
            "change": "rollback of REL-2291 while investigating latency",
            "by": "oncall-li",
        },
    ]
    _write_csv(out / "metrics.csv", metrics)
    _write_csv(out / "db_pool.csv", pool)
    (out / "gateway.jsonl").write_text(
        "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in logs), encoding="utf-8"
    )
    (out / "releases.json").write_text(json.dumps(releases, indent=2) + "\n", encoding="utf-8")


def _write_csv(path: Path, rows: list[dict[str, object]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    generate()
