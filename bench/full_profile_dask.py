"""A full-profile row run for real, serially and on a two-worker Dask cluster on the same cores.

    PYTHONPATH=$PWD .venv/bin/python bench/full_profile_dask.py [--dataset umls]

Notebook 01's ablation at the full profile's budget (up to 80 seeds; its loop stops once
``reverse_edges_auc`` and ``message_passing_helps`` are decided), after the selection its rungs use: once in
this process (one seed after another, one torch thread each, as a KG run trains), once as tasks on a
``dask.distributed.LocalCluster`` of two single-threaded worker processes. Prints both rows' verdicts each
way (they must agree: each seed is a function of its seed alone), the seeds each way ran, their wall times
and the ratio cluster ÷ serial (the goal: at most 0.6 on two cores).
"""

from __future__ import annotations

import argparse
import time


def run(dataset: str, scheduler: str = "") -> tuple[dict[str, str], int, float, dict]:
    from nbkit.kg import claims
    from nbkit.kg.context import KGContext
    from nbkit.kg.experiments import REGISTRY

    with KGContext("cpu", profile="full", scheduler=scheduler, parallel=bool(scheduler)) as ctx:
        chosen = REGISTRY.run("selection", ctx, dataset=dataset).metrics.chosen.overrides()
        start = time.perf_counter()
        ablation = REGISTRY.run("ablation", ctx, dataset=dataset, **chosen)
        wall = time.perf_counter() - start
        rows = {r.key: r for r in claims.REGISTRY.judge(ctx)}
        verdicts = {
            k: f"{rows[k].verdict} ({rows[k].why[:90]})"
            for k in ("reverse_edges_auc", "message_passing_helps")
        }
        return verdicts, ablation.metrics.seeds, wall, dict(ctx.ran["ablation"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="umls")
    args = parser.parse_args(argv)
    from distributed import LocalCluster

    serial = run(args.dataset)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        dask = run(args.dataset, cluster.scheduler_address)
    for name, (verdicts, seeds, wall, ran) in (("serial", serial), ("dask, 2 workers", dask)):
        print(f"{name}: {seeds} seeds, ablation wall {wall:.0f} s, {ran}")
        for key, v in verdicts.items():
            print(f"    {key}: {v}")
    same = serial[0] == dask[0] and serial[1] == dask[1]
    print(f"same verdicts and seeds: {same}; wall ratio dask ÷ serial {dask[2] / serial[2]:.2f} (goal ≤ 0.6)")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
