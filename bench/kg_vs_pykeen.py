"""Benchmark: nbkit.kg's best rung vs PyKEEN's best documented configurations and its RGCN, at equal time.

    .venv/bin/python bench/kg_vs_pykeen.py [--epochs 200] [--no-select] [--peers TuckER ComplEx RGCN] [--threads 1]

Same split (PyKEEN's published UMLS train/valid/test), same stopping rule (early stopping on the
VALIDATION split, best validation weights kept), same wall-clock training budget:

1. nbkit: ``run_selection`` chooses the RGCN rung's decoder / dropout on validation MRR (skip with
   ``--no-select``), then rung 5 trains ``--epochs`` epochs keeping its best validation epoch; its
   training time is the budget every peer gets.
2. PyKEEN, in the configuration its large benchmark (Ali et al., "Bringing Light Into the Dark") finds
   best on these graphs: TuckER and ComplEx with inverse triples, the LCWA training loop and a
   cross-entropy loss (Adam 5e-3, dim 200, batch 256), and PyKEEN's RGCN (its defaults otherwise) — each
   with PyKEEN's early stopper on validation MRR, also stopped when the budget runs out (then the best
   validation weights are restored, as on a normal early stop).

Each model is scored once on the test split with filtered, both-sided, realistic (tie-averaged) MRR
and Hits@10 (nbkit computes it itself; PyKEEN with its RankBasedEvaluator filtering train + valid +
test). Prints MRR, Hits@10, training seconds and the ratios nbkit / PyKEEN.
"""

from __future__ import annotations

import argparse
import json
import math
import time


def run_nbkit(epochs: int, seed: int, select: bool, select_epochs: int) -> dict:
    from nbkit.kg import experiments as ex
    from nbkit.kg.config import SelectionConfig, TrainConfig
    from nbkit.kg.train import LADDER, score_test, train_rung

    chosen = {}
    if select:
        chosen = ex.run_selection(SelectionConfig(dataset="umls", seed=seed, epochs=select_epochs, type_aggrs=(), device="cpu")).metrics["chosen"]
        chosen = {k: chosen[k] for k in ("decoder", "dropout")}
    split = ex.load_split("umls", seed)
    cfg = TrainConfig(epochs=epochs, seed=seed, **chosen)
    res, model, graph = train_rung(split, LADDER[5], cfg, progress=False)
    test = score_test(split, res, model, graph)
    return {"model": f"nbkit rung 5 (RGCN, {cfg.decoder}, dropout {cfg.dropout})", "mrr": test["test_mrr"], "hits_at_10": test["test_hits_at_10"],
            "valid_mrr": res.metrics["valid_mrr"], "train_s": res.train_seconds, "epochs": res.epochs_run, "best_epoch": res.best_epoch}


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


def run_pykeen(model: str, budget_s: float, seed: int, max_epochs: int, frequency: int, patience: int) -> dict:
    from pykeen.datasets import UMLS
    from pykeen.evaluation import RankBasedEvaluator
    from pykeen.pipeline import pipeline

    best_documented = model in ("TuckER", "ComplEx")
    ds = UMLS(create_inverse_triples=best_documented)
    stopper, stopper_kwargs = budget_stopper(budget_s)
    kwargs: dict = {}
    if best_documented:
        kwargs = dict(model_kwargs=dict(embedding_dim=200), training_loop="lcwa", loss="crossentropy",
                      optimizer="adam", optimizer_kwargs=dict(lr=5e-3), training_kwargs=dict(batch_size=256))
    training_kwargs = {**kwargs.pop("training_kwargs", {}), "num_epochs": max_epochs, "use_tqdm": False}
    start = time.perf_counter()
    result = pipeline(
        training=ds.training, validation=ds.validation, testing=ds.testing, model=model, random_seed=seed, device="cpu",
        stopper=stopper, stopper_kwargs=dict(frequency=frequency, patience=patience, metric="inverse_harmonic_mean_rank", relative_delta=0.002, **stopper_kwargs),
        training_kwargs=training_kwargs, evaluator=RankBasedEvaluator(filtered=True),
        evaluation_kwargs=dict(additional_filter_triples=[ds.training.mapped_triples, ds.validation.mapped_triples], use_tqdm=False),
        **kwargs,
    )
    total = time.perf_counter() - start
    how = "inverse triples, LCWA, cross-entropy, Adam 5e-3, dim 200" if best_documented else "PyKEEN defaults"
    return {
        "model": f"pykeen {model} ({how}; early stopping on validation)",
        "mrr": float(result.get_metric("both.realistic.inverse_harmonic_mean_rank")),
        "hits_at_10": float(result.get_metric("both.realistic.hits_at_10")),
        "train_s": float(getattr(result, "train_seconds", None) or total),
        "epochs": len(result.losses),
        "stopped_by": "budget" if result.stopper.over() else ("early stopping" if result.stopper.stopped else "max epochs"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=200, help="nbkit rung 5 epochs (best validation epoch kept)")
    ap.add_argument("--no-select", action="store_true", help="skip nbkit's validation selection of decoder and dropout")
    ap.add_argument("--select-epochs", type=int, default=100)
    ap.add_argument("--peers", nargs="+", default=["TuckER", "ComplEx", "RGCN"])
    ap.add_argument("--max-epochs", type=int, default=1000, help="PyKEEN epoch cap (the time budget normally stops it first)")
    ap.add_argument("--frequency", type=int, default=5, help="PyKEEN: evaluate on validation every N epochs")
    ap.add_argument("--patience", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=0.0, help="training budget per peer (0 = nbkit's training time)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads for every model (fairness)")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()

    import logging

    import torch

    logging.getLogger("pykeen").setLevel(logging.WARNING)  # per-epoch INFO lines drown the table
    logging.getLogger("torch_max_mem").setLevel(logging.ERROR)
    torch.set_num_threads(args.threads)
    ours = run_nbkit(args.epochs, args.seed, not args.no_select, args.select_epochs)
    print(json.dumps(ours), flush=True)
    budget = args.budget_s or ours["train_s"]
    rows = [ours]
    for peer in args.peers:
        rows.append(run_pykeen(peer, budget, args.seed, args.max_epochs, args.frequency, args.patience))
        print(json.dumps(rows[-1]), flush=True)
    print(f"\nUMLS, PyKEEN's split, test scored once; training budget {budget:.1f} s each, {args.threads} thread(s)")
    print(f"{'model':78s} {'MRR':>6s} {'H@10':>6s} {'train s':>8s} {'nbkit/peer MRR':>14s} {'nbkit/peer H@10':>15s} {'time ratio':>10s}")
    for r in rows:
        r["nbkit_over_peer_mrr"] = ours["mrr"] / r["mrr"] if r["mrr"] > 0 else float("inf")
        r["nbkit_over_peer_hits_at_10"] = ours["hits_at_10"] / r["hits_at_10"] if r["hits_at_10"] > 0 else float("inf")
        r["nbkit_over_peer_time"] = ours["train_s"] / r["train_s"]
        print(f"{r['model'][:78]:78s} {r['mrr']:6.3f} {r['hits_at_10']:6.3f} {r['train_s']:8.1f} {r['nbkit_over_peer_mrr']:14.2f} "
              f"{r['nbkit_over_peer_hits_at_10']:15.2f} {r['nbkit_over_peer_time']:10.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
