"""Benchmark: nbkit.kg's rung 6 (ComplEx-N3) vs PyKEEN, each tuned on validation, at equal wall time
with the tuning counted.

    .venv/bin/python bench/kg_vs_pykeen.py [--datasets umls kinships] [--peers ComplEx-N3 ComplEx TuckER RGCN]
        [--complex-dims 400] [--complex-n3s 0.01 0.03] [--complex-lrs 0.2] [--complex-batches 1000]
        [--threads 1] [--json FILE]

Per dataset, both sides get the same split (PyKEEN's published train/valid/test, which nbkit loads
from PyKEEN's wheel), the same number of validation trials, the same early-stopping rule and the
same wall clock, and each is scored once on the test split:

1. nbkit: ``run_selection`` tries every candidate of its rung-6 grid (width, N3 weight, learning
   rate, batch), each early-stopped on validation MRR, then rung 6 trains once with the chosen values
   and keeps its best validation epoch. Its time is selection + final training.
2. Each PyKEEN peer: ``hpo_pipeline`` with as many trials as nbkit's grid has candidates (validation
   MRR is the objective), then ``pipeline`` once with the best trial's values. Its time is HPO + final
   training. Every trial gets nbkit's selection seconds ÷ trials, the final run nbkit's final training
   seconds: PyKEEN's early stopper with nbkit's rule (validate every ``--frequency`` epochs, stop after
   ``--patience`` validations without a new best, any improvement counts: ``relative_delta=0``), also
   stopping when its share of the time is spent (the best validation weights are then restored).
   * ``ComplEx-N3`` — nbkit's recipe inside PyKEEN: ComplEx, inverse triples, LCWA (1-N), cross-entropy,
     Adagrad, ``PowerSumRegularizer(p=3)`` on the entity and relation representations (N3: the cube of
     each complex coordinate's modulus, summed per row, averaged over the rows looked up, at nbkit's
     weight), initial coordinates drawn with nbkit's ``complex_init`` std, and nbkit's very grid
     (Optuna's GridSampler: the same candidates). One difference is left: nbkit's N3 covers each batch's
     true tails, while LCWA looks up every entity as a candidate tail, so PyKEEN's covers all entity rows.
   * ``ComplEx``, ``TuckER`` — the setup PyKEEN's large benchmark (Ali et al., "Bringing Light Into the
     Dark") finds best on these graphs (inverse triples, LCWA, cross-entropy, Adam), tuned over PyKEEN's
     own HPO ranges for the model (TPE, seeded).
   * ``RGCN`` — PyKEEN's RGCN (its default DistMult interaction) tuned over its own HPO ranges (TPE, seeded).

Test MRR and Hits@10 are filtered, both-sided, realistic (tie-averaged): nbkit computes them itself,
PyKEEN with its RankBasedEvaluator filtering train + valid + test. Prints each side's selection and
final seconds and the ratios nbkit / peer. Figures: ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import logging
import math
import time

PYKEEN_DATASETS = {"umls": "UMLS", "kinships": "Kinships"}
GRID = ("complex_dim", "complex_n3", "complex_lr", "complex_batch")
EVAL_BATCH = 1024  # triples per evaluation batch, both sides (nbkit.kg.train.evaluate's default)


def run_nbkit(dataset: str, seed: int, grid: dict, frequency: int, patience: int) -> dict:
    """Rung 6: ``run_selection`` over ``grid`` (the rung-6 group only), then one training with the chosen
    values, scored once on the test split."""
    from nbkit.kg import experiments as ex
    from nbkit.kg.config import SelectionConfig, TrainConfig
    from nbkit.kg.ladder import LADDER
    from nbkit.kg.ranking import score_test
    from nbkit.kg.train import train_rung

    sel_cfg = SelectionConfig(
        dataset=dataset,
        seed=seed,
        epochs=200,
        patience=patience,
        decoders=(),
        dropouts=(),
        type_aggrs=(),
        **grid,
    )
    ctx = ex.KGContext("cpu")
    t0 = time.perf_counter()
    sel = ex.run_selection(sel_cfg, ctx)
    selection_s = time.perf_counter() - t0
    chosen = {k: getattr(sel.metrics.chosen, k) for k in GRID}
    split = ctx.split(dataset, seed)
    cfg = TrainConfig(epochs=200, patience=patience, seed=seed, complex_eval_every=frequency, **chosen)
    t0 = time.perf_counter()
    res, model, graph = train_rung(split, LADDER[6], cfg, progress=False)
    final_s = time.perf_counter() - t0
    test = score_test(split, res, model, graph)
    picked = ", ".join(f"{k.removeprefix('complex_')} {chosen[k]}" for k in GRID)
    return {
        "dataset": dataset,
        "model": f"nbkit rung 6 ComplEx-N3 ({picked})",
        "mrr": test["test_mrr"],
        "hits_at_10": test["test_hits_at_10"],
        "valid_mrr": res.metrics["valid_mrr"],
        "trials": len(sel.metrics.validation),
        "selection_s": selection_s,
        "final_s": final_s,
        "epochs": res.epochs_run,
        "best_epoch": res.best_epoch,
        "chosen": chosen,
        "complex_init": cfg.complex_init,
    }


def budget_stopper():
    """PyKEEN's EarlyStopper, also stopping (and restoring the best validation weights) once ``budget_s``
    is spent — the same rule nbkit follows under ``max_seconds``."""
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

    return BudgetEarlyStopper


def _complex_normal(std: float):
    """nbkit's rung-6 start: every real coordinate ~ N(0, std²). PyKEEN's ComplEx stores complex numbers,
    and ``normal_`` on a complex tensor gives each part variance std²/2, hence std·√2."""
    import torch

    return functools.partial(torch.nn.init.normal_, std=std * math.sqrt(2))


def peer_search(model: str, ours: dict) -> tuple[str, dict, str]:
    """(PyKEEN model name, hpo_pipeline keyword arguments, description) of a peer."""
    categorical = lambda values: {"type": "categorical", "choices": list(values)}  # noqa: E731
    if model == "ComplEx-N3":
        grid = ours["grid"]
        init = _complex_normal(ours["complex_init"])
        space = {
            "model.embedding_dim": [
                d // 2 for d in grid["complex_dims"]
            ],  # PyKEEN counts complex numbers, nbkit real widths
            "regularizer.weight": list(grid["complex_n3s"]),
            "optimizer.lr": list(grid["complex_lrs"]),
            "training.batch_size": list(grid["complex_batches"]),
        }
        return (
            "ComplEx",
            dict(
                model_kwargs=dict(entity_initializer=init, relation_initializer=init),
                model_kwargs_ranges=dict(embedding_dim=categorical(space["model.embedding_dim"])),
                regularizer="powersum",
                regularizer_kwargs=dict(p=3.0, normalize=False),
                regularizer_kwargs_ranges=dict(weight=categorical(space["regularizer.weight"])),
                training_loop="lcwa",
                loss="crossentropy",
                optimizer="adagrad",
                optimizer_kwargs_ranges=dict(lr=categorical(space["optimizer.lr"])),
                training_kwargs_ranges=dict(batch_size=categorical(space["training.batch_size"])),
                sampler="grid",
                sampler_kwargs=dict(search_space=space),
            ),
            (
                "inverse triples, LCWA, cross-entropy, Adagrad, PowerSumRegularizer(p=3), init std "
                f"{ours['complex_init']:g}; "
                f"nbkit's grid {space}"
            ),
        )
    if model in ("TuckER", "ComplEx"):
        return (
            model,
            dict(training_loop="lcwa", loss="crossentropy", optimizer="adam", sampler="tpe"),
            "inverse triples, LCWA, cross-entropy, Adam; PyKEEN's HPO ranges",
        )
    # RGCN's interaction stays its default, DistMult: PyKEEN 1.11's HPO ranges also draw ERMLP, which its RGCN
    # cannot build (ERMLPInteraction needs embedding_dim), failing the trial
    return (
        model,
        dict(model_kwargs=dict(interaction="distmult"), sampler="tpe"),
        "DistMult interaction, PyKEEN's HPO ranges",
    )


def _best_kwargs(fixed: dict, params: dict) -> dict:
    """pipeline kwargs of the best trial: the fixed kwargs plus Optuna's "group.name" values in their
    groups."""
    out = {
        k: v for k, v in fixed.items() if not k.endswith("_ranges") and k not in ("sampler", "sampler_kwargs")
    }
    for key, value in params.items():
        group, name = key.split(".", 1)
        slot = f"{group}_kwargs"
        out[slot] = {**(out.get(slot) or {}), name: value}
    return out


def run_pykeen(
    dataset: str, model: str, ours: dict, seed: int, max_epochs: int, frequency: int, patience: int
) -> dict:
    import pykeen.datasets
    from pykeen.evaluation import RankBasedEvaluator
    from pykeen.hpo import hpo_pipeline
    from pykeen.pipeline import pipeline

    name, search, how = peer_search(model, ours)
    ds = getattr(pykeen.datasets, PYKEEN_DATASETS[dataset])(create_inverse_triples=name != "RGCN")
    stopper = budget_stopper()
    # PyKEEN picks a conservative evaluation batch of 32 on CPU; nbkit scores 1,024 triples at a time, so the
    # peer's validations (inside its time budget) get the same batch
    rule = dict(
        frequency=frequency,
        patience=patience,
        metric="inverse_harmonic_mean_rank",
        relative_delta=0.0,
        evaluation_batch_size=EVAL_BATCH,
    )
    trials = ours["trials"]
    common = dict(
        training=ds.training, validation=ds.validation, testing=ds.testing, model=name, device="cpu"
    )
    sampler_kwargs = {**search.pop("sampler_kwargs", {}), "seed": seed}
    t0 = time.perf_counter()
    hpo = hpo_pipeline(
        **common,
        **search,
        sampler_kwargs=sampler_kwargs,
        n_trials=trials,
        epochs=max_epochs,
        stopper=stopper,
        stopper_kwargs=dict(**rule, budget_s=ours["selection_s"] / trials),
        metric="inverse_harmonic_mean_rank",
        direction="maximize",
        evaluator=RankBasedEvaluator,
        evaluator_kwargs=dict(filtered=True),
        evaluation_kwargs=dict(batch_size=EVAL_BATCH, use_tqdm=False),
    )
    selection_s = time.perf_counter() - t0
    best = hpo.study.best_trial
    kwargs = _best_kwargs(search, best.params)
    kwargs["training_kwargs"] = {
        **kwargs.get("training_kwargs", {}),
        "num_epochs": max_epochs,
        "use_tqdm": False,
    }
    t0 = time.perf_counter()
    result = pipeline(
        **common,
        **kwargs,
        random_seed=seed,
        stopper=stopper,
        stopper_kwargs=dict(**rule, budget_s=ours["final_s"]),
        evaluator=RankBasedEvaluator(filtered=True),
        evaluation_kwargs=dict(
            additional_filter_triples=[ds.training.mapped_triples, ds.validation.mapped_triples],
            use_tqdm=False,
            batch_size=EVAL_BATCH,
        ),
    )
    final_s = time.perf_counter() - t0
    return {
        "dataset": dataset,
        "model": f"pykeen {model} ({how}; {trials} HPO trials, best {best.params})",
        "mrr": float(result.get_metric("both.realistic.inverse_harmonic_mean_rank")),
        "hits_at_10": float(result.get_metric("both.realistic.hits_at_10")),
        "valid_mrr": float(best.value),
        "trials": len(hpo.study.trials),
        "selection_s": selection_s,
        "final_s": final_s,
        "epochs": len(result.losses),
        "stopped_by": "budget"
        if result.stopper.over()
        else ("early stopping" if result.stopper.stopped else "max epochs"),
    }


def main() -> None:
    from nbkit.kg.config import SelectionConfig

    defaults = SelectionConfig()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["umls", "kinships"], choices=sorted(PYKEEN_DATASETS))
    ap.add_argument(
        "--complex-dims",
        nargs="+",
        type=int,
        default=list(defaults.complex_dims),
        help="rung 6 widths (real) in the grid",
    )
    ap.add_argument(
        "--complex-n3s",
        nargs="+",
        type=float,
        default=list(defaults.complex_n3s),
        help="N3 weights in the grid",
    )
    ap.add_argument(
        "--complex-lrs",
        nargs="+",
        type=float,
        default=list(defaults.complex_lrs),
        help="Adagrad learning rates in the grid",
    )
    ap.add_argument(
        "--complex-batches",
        nargs="+",
        type=int,
        default=list(defaults.complex_batches),
        help="batch sizes in the grid",
    )
    ap.add_argument(
        "--peers",
        nargs="+",
        default=["ComplEx-N3", "ComplEx", "TuckER", "RGCN"],
        choices=["ComplEx-N3", "ComplEx", "TuckER", "RGCN"],
    )
    ap.add_argument(
        "--max-epochs",
        type=int,
        default=1000,
        help="PyKEEN epoch cap (the time budget normally stops it first)",
    )
    ap.add_argument("--frequency", type=int, default=5, help="validate every N epochs (both sides)")
    ap.add_argument(
        "--patience", type=int, default=3, help="validations without a new best before stopping (both sides)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads for every model (fairness)"
    )
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()

    import os

    import torch

    logging.getLogger("pykeen").setLevel(logging.WARNING)  # per-epoch INFO lines drown the table
    logging.getLogger("optuna").setLevel(logging.WARNING)
    logging.getLogger("torch_max_mem").setLevel(logging.ERROR)
    torch.set_num_threads(args.threads)
    grid = {
        "complex_dims": tuple(args.complex_dims),
        "complex_n3s": tuple(args.complex_n3s),
        "complex_lrs": tuple(args.complex_lrs),
        "complex_batches": tuple(args.complex_batches),
    }
    all_rows = []
    for dataset in args.datasets:
        ours = run_nbkit(dataset, args.seed, grid, args.frequency, args.patience)
        ours["grid"] = grid
        print(json.dumps({k: v for k, v in ours.items() if k != "grid"}), flush=True)
        rows = [ours]
        for peer in args.peers:
            rows.append(
                run_pykeen(dataset, peer, ours, args.seed, args.max_epochs, args.frequency, args.patience)
            )
            print(json.dumps(rows[-1]), flush=True)
        for r in rows:
            r["total_s"] = r["selection_s"] + r["final_s"]
            r["nbkit_over_peer_mrr"] = ours["mrr"] / r["mrr"] if r["mrr"] > 0 else float("inf")
            r["nbkit_over_peer_hits_at_10"] = (
                ours["hits_at_10"] / r["hits_at_10"] if r["hits_at_10"] > 0 else float("inf")
            )
            r["nbkit_over_peer_total_s"] = (ours["selection_s"] + ours["final_s"]) / r["total_s"]
        all_rows += [{k: v for k, v in r.items() if k != "grid"} for r in rows]
    print(
        f"\nPyKEEN's splits, test scored once per model; {args.threads} thread(s); load average "
        f"{os.getloadavg()[0]:.1f} at the end"
    )
    print(
        f"{'dataset':9s} {'model':60s} {'trials':>6s} {'MRR':>6s} {'H@10':>6s} {'select s':>8s} "
        f"{'final s':>8s} {'total s':>8s} "
        f"{'nbkit/peer MRR':>14s} {'nbkit/peer H@10':>15s} {'nbkit/peer time':>15s}"
    )
    for r in all_rows:
        print(
            f"{r['dataset']:9s} {r['model'][:60]:60s} {r['trials']:6d} {r['mrr']:6.3f} "
            f"{r['hits_at_10']:6.3f} {r['selection_s']:8.1f} "
            f"{r['final_s']:8.1f} {r['total_s']:8.1f} {r['nbkit_over_peer_mrr']:14.2f} "
            f"{r['nbkit_over_peer_hits_at_10']:15.2f} "
            f"{r['nbkit_over_peer_total_s']:15.2f}"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(all_rows, fh, indent=2, default=str)


if __name__ == "__main__":
    main()
