"""`poe reliability` (`python -m reliability`): the full load, the soak and every fault, into
reliability/report.md (and reliability/results.json).

    python -m reliability                                  # everything (about 25 minutes on 2 cores)
    python -m reliability --skip-soak --kill-repeats 1     # without the 10-minute soak
    python -m reliability --replicas 0                     # the load through one server only (default: also 2)
    python -m reliability --clients 50 --searches 10000 --soak-minutes 10 --soak-rate 10

Its own embedded PostgreSQL lives under .kb-reliability/ (the corpus is ingested into a fresh database
there, the way evals/run.py builds its own); every other process (kb serve, kb worker, moto's server, the
local embeddings endpoint, the proxy) runs on loopback and is stopped when its part ends.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench import machine
from reliability import faults, hostile, load, report
from reliability.harness import REPO, Cluster

OUT = REPO / "reliability"
FAULTS = ["restart", "embedding", "aws", "kills"]


def timed(results: dict[str, Any], name: str, run: Any) -> Any:
    """Run one part; its seconds go to results['seconds']. A part that raises is recorded in
    results['failures'] (and fails the report) instead of ending the run; it returns None then."""
    print(f"{name} ...", flush=True)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    try:
        value = run()
    except Exception as exc:
        print(traceback.format_exc(), flush=True)
        results.setdefault("failures", []).append(f"{name}: {type(exc).__name__}: {exc}")
        value = None
    results.setdefault("seconds", {})[name] = round(time.perf_counter() - started, 1)
    # The machine's 1-minute load average around each part: anything else running shows here.
    results.setdefault("load_average", {})[name] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(f"{name}: {results['seconds'][name]} s", flush=True)
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--searches", type=int, default=10_000)
    parser.add_argument("--load-deadline", type=float, default=1800, help="hard deadline of the load, seconds")
    parser.add_argument("--soak-minutes", type=float, default=10)
    parser.add_argument("--soak-clients", type=int, default=8)
    parser.add_argument("--soak-rate", type=float, default=10, help="searches per second, all clients together")
    parser.add_argument("--kill-repeats", type=int, default=3, help="times the worker is killed at each stage")
    parser.add_argument(
        "--replicas", type=int, default=2, help="the load again through this many stateless replicas (0: not)"
    )
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--replicas-only", action="store_true", help="of the loads, only the one through replicas")
    parser.add_argument("--skip-soak", action="store_true")
    parser.add_argument("--skip-faults", action="store_true")
    parser.add_argument("--skip-hostile", action="store_true")
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=FAULTS, help="which faults to inject")
    parser.add_argument(
        "--update",
        action="store_true",
        help="keep the parts of the existing results.json that this run skips, and rewrite the report",
    )
    parser.add_argument("--quick", action="store_true", help="short outages, for a smoke run (not for the report)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    command = "python -m reliability " + " ".join(argv if argv is not None else sys.argv[1:])
    results: dict[str, Any] = {"command": command.strip(), "started": time.strftime("%Y-%m-%d %H:%M %Z")}
    previous = args.out / "results.json"
    if args.update and previous.exists():
        # Each part's figures stay with the run that measured them; `runs` lists every run merged here.
        earlier = json.loads(previous.read_text())
        results = {**earlier, "runs": [*earlier.get("runs", [_run_of(earlier)]), _run_of(results)]}
        results["failures"] = []
    state = load.STATE
    work = state / "runs"
    shutil.rmtree(work, ignore_errors=True)
    cluster = Cluster(state)
    try:
        superuser, db_url = timed(results, "corpus database", lambda: load.corpus_database(state))
        cluster.superuser = superuser
        results["machine"] = machine.describe(superuser)
        loads = [] if args.replicas_only else [("load", 1, "load")]
        if args.replicas > 1:
            loads.append((f"load through {args.replicas} replicas", args.replicas, "load_replicas"))
        for name, replicas, key in [] if args.skip_load else loads:
            outcome = timed(
                results,
                name,
                lambda r=replicas, k=key: load.run_load(
                    db_url,
                    work / k,
                    clients=args.clients,
                    searches=args.searches,
                    deadline_s=args.load_deadline,
                    replicas=r,
                ),
            )
            if outcome is not None:
                results[key] = outcome.summary()
        if not args.skip_soak:
            soaked = timed(
                results,
                "soak",
                lambda: load.soak(
                    db_url,
                    work / "soak",
                    minutes=args.soak_minutes,
                    clients=args.soak_clients,
                    rate_per_s=args.soak_rate,
                    warmup_s=min(120.0, args.soak_minutes * 60 / 5),
                ),
            )
            if soaked is not None:
                results["soak"] = soaked.summary()
                results["soak"]["series"] = [[s.at_s, s.rss_mb, s.threads, s.fds] for s in soaked.load.samples]
        if not args.skip_faults:
            run_faults(results, cluster, db_url, work, args.kill_repeats, which=args.faults, quick=args.quick)
        if not args.skip_hostile:
            hostile_input = timed(results, "hostile input", lambda: hostile.run_security_tests(work / "hostile"))
            if hostile_input is not None:
                results["hostile"] = hostile_input
    finally:
        cluster.shutdown()  # its data stays under .kb-reliability/
    results["seconds"]["total"] = round(time.perf_counter() - started, 1)
    if "runs" in results:
        results["runs"][-1]["minutes"] = round(results["seconds"]["total"] / 60, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    report.write(args.out / "report.md", results)
    print(f"wrote {args.out / 'report.md'} in {results['seconds']['total']} s", flush=True)
    return 0 if report.all_passed(results) else 1


def _run_of(results: dict[str, Any]) -> dict[str, Any]:
    total = results.get("seconds", {}).get("total")
    minutes = round(total / 60, 1) if total is not None else None
    return {"command": results.get("command"), "started": results.get("started"), "minutes": minutes}


def run_faults(
    results: dict[str, Any],
    cluster: Cluster,
    db_url: str,
    work: Path,
    kill_repeats: int,
    *,
    which: list[str] = FAULTS,
    quick: bool = False,
) -> None:
    superuser = cluster.superuser
    outage = 6 if quick else 15
    idle, batch = (5, 20) if quick else (30, 90)
    found: dict[str, Any] = results.setdefault("faults", {})
    if "restart" in which:
        restart = timed(
            results,
            "fault: database restart",
            lambda: faults.database_restart(cluster, db_url, work / "restart", clients=8, outage_s=outage),
        )
        if restart is not None:
            found["database_restart"] = restart.summary()
    if "embedding" in which:
        embedding = timed(
            results,
            "fault: embedding endpoint down",
            lambda: faults.embedding_outage(superuser, work / "embedding", clients=8, outage_s=outage),
        )
        if embedding is not None:
            found["embedding_outage"] = embedding.summary()
    if "aws" not in which and "kills" not in which:
        return
    with faults.ingest_rig(superuser, work / "ingest") as rig:
        if "aws" in which:
            outages = [
                timed(
                    results,
                    "fault: AWS endpoint down (port closed)",
                    lambda: faults.aws_outage(rig, idle_outage_s=idle, batch_outage_s=batch, mode="down"),
                ),
                timed(
                    results,
                    "fault: AWS endpoint refusing the delete",
                    lambda: faults.aws_outage(rig, idle_outage_s=5, batch_outage_s=16, mode="deny"),
                ),
            ]
            found["aws_outage"] = [o.summary() for o in outages if o is not None]
        if "kills" in which:
            kills = []
            for stage in faults.STAGES:
                for n in range(1, kill_repeats + 1):
                    name = f"fault: worker killed ({stage}) #{n}"
                    kills.append(timed(results, name, lambda s=stage: faults.worker_kill(rig, s)))
            found["worker_kills"] = [k.summary() for k in kills if k is not None]


if __name__ == "__main__":
    raise SystemExit(main())
