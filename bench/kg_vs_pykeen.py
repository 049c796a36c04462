"""Benchmark: nbkit.kg's best rung vs PyKEEN's best documented configurations and its RGCN, at equal time.

    .venv/bin/python bench/kg_vs_pykeen.py [--datasets umls kinships] [--peers ComplEx-N3 ComplEx TuckER RGCN]
        [--complex-dims 200 400] [--complex-n3s 0.003 0.01 0.03] [--threads 1] [--json FILE]

Per dataset, same split (PyKEEN's published train/valid/test, which nbkit loads from PyKEEN's wheel),
same stopping rule (early stopping on the VALIDATION split, best validation weights kept), same
wall-clock training budget:

1. nbkit: ``run_selection`` chooses rung 6's width, N3 weight, learning rate and batch on validation
   MRR (its grid, each run early-stopped on validation; the test split is not read), then rung 6
   (ComplEx with reciprocal relations, 1-N cross-entropy, N3, Adagrad) trains with the chosen values,
   keeping its best validation epoch; its training time is the budget every peer gets.
2. PyKEEN (``pipeline``), each with PyKEEN's early stopper on validation MRR, also stopped when the budget
   runs out (the best validation weights are then restored, as on a normal early stop):
   * ``ComplEx-N3``: the same recipe inside PyKEEN — ComplEx, inverse triples, LCWA, cross-entropy,
     Adagrad, its ``LpRegularizer(p=3)`` — with nbkit's chosen width, N3 weight, lr and batch;
   * ``ComplEx`` and ``TuckER``: the configuration PyKEEN's large benchmark (Ali et al., "Bringing Light
     Into the Dark") finds best on these graphs — inverse triples, LCWA, cross-entropy (Adam 5e-3,
     dim 200, batch 256);
   * ``RGCN``: PyKEEN's RGCN with its defaults.

Each model is scored once on the test split with filtered, both-sided, realistic (tie-averaged) MRR
and Hits@10 (nbkit computes it itself; PyKEEN with its RankBasedEvaluator filtering train + valid +
test). Prints MRR, Hits@10, training seconds and the ratios nbkit / PyKEEN.
"""

from __future__ import annotations

import argparse
import json
import math
import time

PYKEEN_DATASETS = {"umls": "UMLS", "kinships": "Kinships"}


def run_nbkit(dataset: str, seed: int, select: bool, grid: dict) -> dict:
    """Rung 6 with its choices made on validation (``run_selection``, rung-6 grid only), then trained
    once with them and scored on the test split."""
    from nbkit.kg import experiments as ex
    from nbkit.kg.config import SelectionConfig, TrainConfig
    from nbkit.kg.train import LADDER, score_test, train_rung

    keys = ("complex_dim", "complex_n3", "complex_lr", "complex_batch")
    chosen, selection_s = {}, 0.0
    if select:
        t0 = time.perf_counter()
        sel = ex.run_selection(SelectionConfig(dataset=dataset, seed=seed, epochs=200, decoders=(), dropouts=(), type_aggrs=(), device="cpu", **grid))
        selection_s = time.perf_counter() - t0
        chosen = {k: sel.metrics["chosen"][k] for k in keys}
    split = ex.load_split(dataset, seed)
    cfg = TrainConfig(epochs=200, patience=3, seed=seed, **chosen)
    res, model, graph = train_rung(split, LADDER[6], cfg, progress=False)
    test = score_test(split, res, model, graph)
    picked = ", ".join(f"{k.removeprefix('complex_')} {getattr(cfg, k)}" for k in keys)
    return {"dataset": dataset, "model": f"nbkit rung 6 ComplEx-N3 ({picked})", "mrr": test["test_mrr"], "hits_at_10": test["test_hits_at_10"],
            "valid_mrr": res.metrics["valid_mrr"], "train_s": res.train_seconds, "epochs": res.epochs_run, "best_epoch": res.best_epoch,
            "selection_s": round(selection_s, 1), "chosen": {k: getattr(cfg, k) for k in keys}}


def budget_stopper(budget_s: float):
    """PyKEEN's EarlyStopper, also stopping (and restoring the best validation weights) once the
    training budget is spent — the same rule nbkit follows under ``max_seconds``."""
    import dataclasses

    import torch
    from pykeen.stoppers import EarlyStopper

    @dataclasses.dataclass
    class BudgetEarlyStopper(EarlyStopper):
        budget_s: float = math.inf
        started: float = dataclasses.field(default_factory=time.perf_counter)

        def over(self) -> bool:
            return time.perf_counter() - self.started > self.budget_s

        def should_evaluate(self, epoch: int) -> bool:
            return super().should_evaluate(epoch) or (epoch > 0 and self.over())

        def should_stop(self, epoch: int) -> bool:
            if super().should_stop(epoch):
                return True
            if not self.over():
                return False
            self.stopped = True
            if self.best_model_path is not None and self.best_model_path.is_file():
                self.model.load_state_dict(torch.load(self.best_model_path, weights_only=False))
                self.best_model_path.unlink()
            return True

    return BudgetEarlyStopper, {"budget_s": budget_s}


def pykeen_kwargs(model: str, chosen: dict) -> tuple[str, dict, str]:
    """(PyKEEN model name, pipeline kwargs, description) of a peer."""
    if model == "ComplEx-N3":
        dim = chosen["complex_dim"] // 2  # PyKEEN's ComplEx dim counts complex numbers; nbkit's the real width
        return "ComplEx", dict(
            model_kwargs=dict(embedding_dim=dim, regularizer="lp", regularizer_kwargs=dict(p=3.0, weight=chosen["complex_n3"])),
            training_loop="lcwa", loss="crossentropy", optimizer="adagrad", optimizer_kwargs=dict(lr=chosen["complex_lr"]),
            training_kwargs=dict(batch_size=chosen["complex_batch"]),
        ), f"inverse triples, LCWA, cross-entropy, Adagrad {chosen['complex_lr']}, LpRegularizer(p=3, {chosen['complex_n3']}), dim {dim}"
    if model in ("TuckER", "ComplEx"):
        return model, dict(model_kwargs=dict(embedding_dim=200), training_loop="lcwa", loss="crossentropy", optimizer="adam",
                           optimizer_kwargs=dict(lr=5e-3), training_kwargs=dict(batch_size=256)), "inverse triples, LCWA, cross-entropy, Adam 5e-3, dim 200"
    return model, {}, "PyKEEN defaults"


def run_pykeen(dataset: str, model: str, budget_s: float, seed: int, max_epochs: int, frequency: int, patience: int, chosen: dict) -> dict:
    import pykeen.datasets
    from pykeen.evaluation import RankBasedEvaluator
    from pykeen.pipeline import pipeline

    name, kwargs, how = pykeen_kwargs(model, chosen)
    ds = getattr(pykeen.datasets, PYKEEN_DATASETS[dataset])(create_inverse_triples=name != "RGCN")
    stopper, stopper_kwargs = budget_stopper(budget_s)
    training_kwargs = {**kwargs.pop("training_kwargs", {}), "num_epochs": max_epochs, "use_tqdm": False}
    start = time.perf_counter()
    result = pipeline(
        training=ds.training, validation=ds.validation, testing=ds.testing, model=name, random_seed=seed, device="cpu",
        stopper=stopper, stopper_kwargs=dict(frequency=frequency, patience=patience, metric="inverse_harmonic_mean_rank", relative_delta=0.002, **stopper_kwargs),
        training_kwargs=training_kwargs, evaluator=RankBasedEvaluator(filtered=True),
        evaluation_kwargs=dict(additional_filter_triples=[ds.training.mapped_triples, ds.validation.mapped_triples], use_tqdm=False),
        **kwargs,
    )
    total = time.perf_counter() - start
    return {
        "dataset": dataset,
        "model": f"pykeen {model} ({how}; early stopping on validation)",
        "mrr": float(result.get_metric("both.realistic.inverse_harmonic_mean_rank")),
        "hits_at_10": float(result.get_metric("both.realistic.hits_at_10")),
        "train_s": float(getattr(result, "train_seconds", None) or total),
        "epochs": len(result.losses),
        "stopped_by": "budget" if result.stopper.over() else ("early stopping" if result.stopper.stopped else "max epochs"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["umls", "kinships"], choices=sorted(PYKEEN_DATASETS))
    ap.add_argument("--no-select", action="store_true", help="skip nbkit's validation selection (use TrainConfig's rung-6 defaults)")
    ap.add_argument("--complex-dims", nargs="+", type=int, help="rung 6 widths to choose from on validation (default: SelectionConfig's)")
    ap.add_argument("--complex-n3s", nargs="+", type=float, help="rung 6 N3 weights to choose from on validation (default: SelectionConfig's)")
    ap.add_argument("--peers", nargs="+", default=["ComplEx-N3", "ComplEx", "TuckER", "RGCN"])
    ap.add_argument("--max-epochs", type=int, default=1000, help="PyKEEN epoch cap (the time budget normally stops it first)")
    ap.add_argument("--frequency", type=int, default=5, help="PyKEEN: evaluate on validation every N epochs (nbkit's rung 6 does too)")
    ap.add_argument("--patience", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=0.0, help="training budget per peer (0 = nbkit's training time)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads for every model (fairness)")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()

    import logging
    import os

    import torch

    logging.getLogger("pykeen").setLevel(logging.WARNING)  # per-epoch INFO lines drown the table
    logging.getLogger("torch_max_mem").setLevel(logging.ERROR)
    torch.set_num_threads(args.threads)
    all_rows = []
    for dataset in args.datasets:
        grid = {k: tuple(v) for k, v in (("complex_dims", args.complex_dims), ("complex_n3s", args.complex_n3s)) if v}
        ours = run_nbkit(dataset, args.seed, not args.no_select, grid)
        print(json.dumps(ours), flush=True)
        budget = args.budget_s or ours["train_s"]
        rows = [ours]
        for peer in args.peers:
            rows.append(run_pykeen(dataset, peer, budget, args.seed, args.max_epochs, args.frequency, args.patience, ours["chosen"]))
            print(json.dumps(rows[-1]), flush=True)
        for r in rows:
            r["budget_s"] = budget
            r["nbkit_over_peer_mrr"] = ours["mrr"] / r["mrr"] if r["mrr"] > 0 else float("inf")
            r["nbkit_over_peer_hits_at_10"] = ours["hits_at_10"] / r["hits_at_10"] if r["hits_at_10"] > 0 else float("inf")
            r["nbkit_over_peer_time"] = ours["train_s"] / r["train_s"]
        all_rows += rows
    print(f"\nPyKEEN's splits, test scored once per model; {args.threads} thread(s); load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{'dataset':9s} {'model':78s} {'MRR':>6s} {'H@10':>6s} {'train s':>8s} {'budget s':>8s} {'nbkit/peer MRR':>14s} {'nbkit/peer H@10':>15s}")
    for r in all_rows:
        print(f"{r['dataset']:9s} {r['model'][:78]:78s} {r['mrr']:6.3f} {r['hits_at_10']:6.3f} {r['train_s']:8.1f} {r['budget_s']:8.1f} "
              f"{r['nbkit_over_peer_mrr']:14.2f} {r['nbkit_over_peer_hits_at_10']:15.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(all_rows, fh, indent=2)


if __name__ == "__main__":
    main()
