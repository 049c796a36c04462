"""Efficiency: each of nbkit's hot paths against the engine underneath it, measured side by side in one run.

    .venv/bin/python bench/efficiency.py [--quick] [--only NAME ...] [--repeats N] [--json FILE]

Six pairs, each measured on the same cores and threads, the same data and shapes (nbkit's path → the
reference in the same run):

* ``kg-eval``: ``nbkit.kg.ranking.evaluate``, one trained rung-5 model's filtered ranking of the scale
  experiment's 2,000 validation queries over 47k entities → PyKEEN's ``RankBasedEvaluator`` (filtered) on the
  same model weights and queries.
* ``kg-train``: rung 6 ComplEx-N3 on UMLS (``train_rung``), time per epoch → PyKEEN's ``pipeline`` with the
  same recipe (ComplEx, inverse triples, LCWA, cross-entropy, N3, Adagrad; ``bench/kg_vs_pykeen.py``'s).
* ``lora-step``: kiss-lora's training step (``VariantTrainer``, KISS q/v r8) on SmolLM2-135M → a plain
  transformers + peft loop with the same batches, dtype, AdamW and threads.
* ``lm-token``: notebook 03's path, DSPy → one local server on one thread with DSPy's cache off, per
  completion token → the same prompts, grammar and max tokens through llama-cpp-python's in-process
  ``Llama`` on one thread.
* ``compile``: notebook 03's compile loop, ``nbkit.signatures.compiling.compile_program`` (BootstrapFewShot,
  its teacher's requests sent ahead of the pass to the local servers, cold in-run cache) → DSPy's own
  BootstrapFewShot pass on the same compile sets, module, adapter and servers, one request at a time, per
  compile of the default run's compile sets (``--quick``: the 10 % set only).
* ``zero-step``: the ZeRO ladder's monitored training step (``nbkit.zero.worker.run_rung``) at stage 2 on 2
  ranks → a bare ``deepspeed.initialize`` engine step at the same config, model and batches.

Each pair first checks that both sides do the same work (the same ranks, steps and losses, tokens,
queries, compiled programs); a pair that fails its check is not timed. Then each side is timed ``--repeats``
times (at least 5), interleaved (nbkit then the reference, the reference then nbkit, ...), and the medians
are compared.
One line per pair, at column 0::

    efficiency NAME: X (nbkit's time ÷ the reference's time; goal ≤ G)

followed by both absolute times and what was compared. Exit 0 when every pair was measured, 1 otherwise.
``--quick`` times fewer epochs, steps, prompts and compile sets per repeat (and trains kg-eval's model for
5 s instead of the scale experiment's 30 s); the default is the same comparison with more of each. Wall
times on a loaded machine are loaded; the ratios, each measured interleaved in one run, are what to read.
Figures: ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

GOALS = {
    "kg-eval": 1.0,
    "kg-train": 1.0,
    "lora-step": 1.05,
    "lm-token": 1.1,
    "compile": 1.0,
    "zero-step": 1.1,
}


class NotSameWork(RuntimeError):
    """The two sides of a pair did not do the same work: timing them would compare different things."""


@dataclass
class PairResult:
    name: str
    unit: str  # what one timed figure is ("s per evaluation", ...)
    nbkit: list[float]
    reference: list[float]
    reference_name: str
    compared: str  # what both sides did, in a sentence
    checked: str  # how "same work" was checked, and what it found
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(self.nbkit) / statistics.median(self.reference)

    def lines(self) -> list[str]:
        goal = GOALS[self.name]
        a, b = statistics.median(self.nbkit), statistics.median(self.reference)
        verdict = "meets the goal" if self.ratio <= goal else "ABOVE the goal"
        if self.ratio < 1:
            verdict += f"; the reference is {1 / self.ratio:.2f}× slower than nbkit"
        return [
            f"efficiency {self.name}: {self.ratio:.2f} "
            f"(nbkit's time ÷ the reference's time; goal ≤ {goal:g})",
            f"    nbkit {_fmt(a)} {self.unit}, {self.reference_name} {_fmt(b)} {self.unit} (medians of "
            f"{len(self.nbkit)} interleaved repeats; nbkit {_spread(self.nbkit)}, reference "
            f"{_spread(self.reference)}): {verdict}",
            f"    compared: {self.compared}",
            f"    same work: {self.checked}",
            *(f"    {n}" for n in self.notes),
        ]

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "ratio": self.ratio,
            "goal": GOALS[self.name],
            "unit": self.unit,
            "nbkit": self.nbkit,
            "reference": self.reference,
            "reference_name": self.reference_name,
            "compared": self.compared,
            "checked": self.checked,
            "notes": self.notes,
        }


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _spread(xs: list[float]) -> str:
    return f"{_fmt(min(xs))}–{_fmt(max(xs))}"


def interleaved(nbkit: Callable[[], float], reference: Callable[[], float], repeats: int):
    """Each side's figure ``repeats`` times, alternating which goes first, so drift in the machine's load
    falls on both alike."""
    a: list[float] = []
    b: list[float] = []
    for i in range(repeats):
        if i % 2 == 0:
            a.append(nbkit())
            b.append(reference())
        else:
            b.append(reference())
            a.append(nbkit())
        print(f"      repeat {i + 1}/{repeats}: nbkit {_fmt(a[-1])}, reference {_fmt(b[-1])}", flush=True)
    return a, b


def one_thread() -> None:
    import torch

    torch.set_num_threads(1)


# -- kg-eval ---------------------------------------------------------------------------------------------


def _pykeen_scorer(decoder, num_entities: int, num_relations: int):
    """A PyKEEN model whose scores are nbkit's decoder over the embeddings in its ``z`` (set before each
    evaluation): PyKEEN's evaluator then ranks exactly the scores nbkit ranks."""
    import torch
    from pykeen.models import Model
    from pykeen.triples import KGInfo

    class Scorer(Model):
        z = None

        def __init__(self):
            super().__init__(
                triples_factory=KGInfo(num_entities, num_relations, create_inverse_triples=False),
                random_seed=0,
            )
            self.anchor = torch.nn.Parameter(torch.zeros(1))  # PyKEEN reads the device off a parameter

        def _reset_parameters_(self):
            pass

        def _get_entity_len(self, *, mode=None):
            return num_entities

        def collect_regularization_term(self):
            return torch.zeros(())

        def score_hrt(self, hrt_batch, *, mode=None):
            return decoder(self.z, hrt_batch[:, 0], hrt_batch[:, 1], hrt_batch[:, 2]).unsqueeze(1)

        def score_t(self, hr_batch, *, slice_size=None, mode=None, tails=None):
            return decoder.score_tails(self.z, hr_batch[:, 0], hr_batch[:, 1], tails)

        def score_h(self, rt_batch, *, slice_size=None, mode=None, heads=None):
            return decoder.score_heads(self.z, rt_batch[:, 0], rt_batch[:, 1], heads)

        def score_r(self, ht_batch, *, slice_size=None, mode=None, relations=None):
            raise NotImplementedError("relation prediction is not evaluated")

    return Scorer()


def pair_kg_eval(args) -> PairResult:
    import dataclasses
    import logging

    import numpy as np
    import torch
    from pykeen.evaluation import RankBasedEvaluator
    from pykeen.evaluation.evaluation_loop import LCWAEvaluationLoop
    from pykeen.triples import CoreTriplesFactory

    from nbkit.kg import graph as kgg
    from nbkit.kg.config import ScaleConfig, TrainConfig
    from nbkit.kg.ladder import LADDER
    from nbkit.kg.ranking import eval_sample, evaluate, true_index
    from nbkit.kg.synthetic import synthetic_kg
    from nbkit.kg.train import train_rung

    one_thread()
    logging.getLogger("torch_max_mem").setLevel(logging.ERROR)
    sc = ScaleConfig()
    t0 = time.perf_counter()
    kg = synthetic_kg(sc.entities, sc.triples, seed=sc.seed, num_clusters=sc.clusters)
    split = kgg.split_kg(kg, seed=sc.seed)
    filt = true_index(split)  # built once per split, shared with training in the notebook
    budget = 5.0 if args.quick else sc.max_seconds
    tc = TrainConfig(
        epochs=sc.epochs,
        hidden=sc.hidden,
        lr=sc.lr,
        dropout=sc.dropout,
        seed=sc.seed,
        max_seconds=budget,
        eval_max_triples=sc.eval_max_triples,
        cpu_threads=1,
        batch_size=sc.batch_size,
        num_negatives=sc.num_negatives,
        embed_lr=sc.embed_lr,
        input_init=sc.input_init,
        eval_every_seconds=None,
        eval_slice=sc.eval_slice,
    )
    tc = dataclasses.replace(tc, num_neighbors=(sc.fanout,) * tc.layers)
    _, model, graph = train_rung(split, LADDER[5], tc, progress=False)
    model.eval()
    idx = eval_sample(len(split.valid), sc.eval_max_triples, sample_slice=sc.eval_slice)
    queries = split.valid[idx]
    batch = 1024  # evaluate's default: triples per batch on nbkit's side, queries per batch on PyKEEN's

    def nbkit_run():
        t = time.perf_counter()
        m = evaluate(
            model,
            graph,
            split,
            "valid",
            filt=filt,
            max_triples=sc.eval_max_triples,
            per_query=True,
            sample_slice=sc.eval_slice,
            batch_size=batch,
        )
        return time.perf_counter() - t, m

    class Capture(RankBasedEvaluator):
        """PyKEEN's evaluator, keeping its per-query realistic ranks before they are summarised."""

        def finalize(self):
            self.kept = {
                target: torch.as_tensor(np.concatenate(self.ranks[target, "realistic"]))
                for target in ("head", "tail")
            }
            return super().finalize()

    # PyKEEN's evaluation loop with its sparse filter index (built once here, as nbkit's index of the known
    # triples is built once per split); its older Evaluator.evaluate compares every query with every known
    # triple in each evaluation, over ten times slower on this graph
    scorer = _pykeen_scorer(model.decoder, split.num_nodes, model.decoder.rel.size(0))
    evaluator = Capture(filtered=True)
    loop = LCWAEvaluationLoop(
        triples_factory=CoreTriplesFactory(
            queries, num_entities=split.num_nodes, num_relations=split.num_relations
        ),
        evaluator=evaluator,
        additional_filter_triples=[split.train, split.valid, split.test],
        model=scorer,
    )
    print(
        f"    graph {split.sizes()}, rung 5 trained for {budget:.0f} s; "
        f"set-up {time.perf_counter() - t0:.0f} s",
        flush=True,
    )

    def reference_run():
        t = time.perf_counter()
        with torch.no_grad():
            scorer.z = model.embed(graph)
        result = loop.evaluate(batch_size=batch, use_tqdm=False, pin_memory=False)
        return time.perf_counter() - t, result

    _, ours = nbkit_run()
    _, theirs = reference_run()
    # ranks are whole or half numbers: back from evaluate's reciprocal ranks, rounded to the nearest half
    ranks = torch.round(2 / torch.tensor(ours["reciprocal_ranks"], dtype=torch.float64)) / 2
    n = len(queries)
    nb_tail, nb_head = ranks[:n], ranks[n:]  # evaluate's order: one batch's tail queries, then its heads
    pk_tail, pk_head = evaluator.kept["tail"].double(), evaluator.kept["head"].double()
    mrr_pk = float(theirs.get_metric("both.realistic.inverse_harmonic_mean_rank"))
    if not (torch.equal(nb_tail, pk_tail) and torch.equal(nb_head, pk_head)):
        differ = int((nb_tail != pk_tail).sum() + (nb_head != pk_head).sum())
        raise NotSameWork(
            f"kg-eval: ranks differ in {differ} of {2 * n} queries (MRR {ours['mrr']:.6f} vs {mrr_pk:.6f})"
        )
    a, b = interleaved(lambda: nbkit_run()[0], lambda: reference_run()[0], args.repeats)
    embed = []
    for _ in range(3):
        t = time.perf_counter()
        with torch.no_grad():
            model.embed(graph)
        embed.append(time.perf_counter() - t)
    return PairResult(
        "kg-eval",
        "per evaluation",
        a,
        b,
        "PyKEEN RankBasedEvaluator (LCWAEvaluationLoop)",
        f"filtered, realistic ranks of {2 * n:,} validation queries ({n:,} triples × head and tail) over "
        f"{split.num_nodes:,} entities, {len(split.all_true()):,} known triples filtered; one rung-5 model "
        f"(RGCN + ComplEx), both sides including its full-graph embedding; batches of {batch}; 1 thread",
        f"every query's rank equal on both sides (MRR {ours['mrr']:.6f} vs {mrr_pk:.6f})",
        [
            "each side's filter index of the known triples is built once, outside the timing (nbkit's per "
            "split, PyKEEN's per evaluation loop)",
            f"of each side's time, the full-graph embedding (the same call on both) takes "
            f"{_fmt(statistics.median(embed))} (median of 3, timed after the repeats)",
        ],
    )


# -- kg-train ----------------------------------------------------------------------------------------------


def pair_kg_train(args) -> PairResult:
    import logging

    import torch
    from pykeen.datasets import UMLS
    from pykeen.pipeline import pipeline
    from pykeen.training.callbacks import TrainingCallback

    from nbkit.kg import experiments as ex
    from nbkit.kg.config import TrainConfig
    from nbkit.kg.ladder import LADDER
    from nbkit.kg.train import train_rung

    sys.path.insert(0, str(Path(__file__).parent))
    from kg_vs_pykeen import peer_search

    one_thread()
    for name in ("pykeen", "torch_max_mem", "optuna"):
        logging.getLogger(name).setLevel(logging.ERROR)
    epochs = 12 if args.quick else 40
    cfg = TrainConfig(epochs=epochs, patience=0, complex_eval_every=epochs, seed=0, cpu_threads=1)
    split = ex.KGContext("cpu").split("umls", 0)
    ds = UMLS(create_inverse_triples=True)
    ours_grid = {
        "grid": {
            "complex_dims": (cfg.complex_dim,),
            "complex_n3s": (cfg.complex_n3,),
            "complex_lrs": (cfg.complex_lr,),
            "complex_batches": (cfg.complex_batch,),
        },
        "complex_init": cfg.complex_init,
    }
    model_name, search, how = peer_search("ComplEx-N3", ours_grid)
    kwargs = dict(
        model=model_name,
        model_kwargs=dict(search["model_kwargs"], embedding_dim=cfg.complex_dim // 2),
        regularizer=search["regularizer"],
        regularizer_kwargs=dict(search["regularizer_kwargs"], weight=cfg.complex_n3),
        training_loop=search["training_loop"],
        loss=search["loss"],
        optimizer=search["optimizer"],
        optimizer_kwargs=dict(lr=cfg.complex_lr),
    )

    # the same triples on both sides (nbkit loads PyKEEN's published UMLS split)
    names = split.entity_names()
    ours_train = {(names[h], split.relations[r], names[t]) for h, r, t in split.train.tolist()}
    theirs_train = {tuple(x) for x in ds.training.triples.tolist()}
    if ours_train != theirs_train:
        raise NotSameWork(f"kg-train: train triples differ ({len(ours_train)} vs {len(theirs_train)})")

    class Stamps:
        """Epoch ends, through the live figure nbkit's loop reports each epoch's loss to."""

        def __init__(self):
            self.t: list[float] = []
            self.loss: list[float] = []

        def add(self, series, x, y):
            if series.endswith(" loss"):
                self.t.append(time.perf_counter())
                self.loss.append(float(y))

        def extend(self, *a, **k):
            pass

        def flush(self):
            pass

    def nbkit_run():
        stamps = Stamps()
        train_rung(split, LADDER[6], cfg, progress=False, live=stamps)
        return statistics.median(b - a for a, b in zip(stamps.t, stamps.t[1:], strict=False)), stamps.loss

    class PykeenStamps(TrainingCallback):
        def __init__(self):
            super().__init__()
            self.t: list[float] = []

        def post_epoch(self, epoch, epoch_loss, **kw):
            self.t.append(time.perf_counter())

    def reference_run():
        stamps = PykeenStamps()
        result = pipeline(
            training=ds.training,
            validation=ds.validation,
            testing=ds.testing,
            device="cpu",
            random_seed=0,
            training_kwargs=dict(
                num_epochs=epochs, batch_size=cfg.complex_batch, use_tqdm=False, callbacks=[stamps]
            ),
            evaluation_kwargs=dict(use_tqdm=False, batch_size=1024),
            **kwargs,
        )
        return statistics.median(b - a for a, b in zip(stamps.t, stamps.t[1:], strict=False)), result

    _, loss = nbkit_run()
    _, result = reference_run()
    if len(loss) != epochs or len(result.losses) != epochs:
        raise NotSameWork(f"kg-train: epochs run {len(loss)} (nbkit) vs {len(result.losses)} (PyKEEN)")
    rows_nb = 2 * len(split.train)
    # LCWA's rows: each distinct (head, relation) and, for the inverse triples, each distinct (tail, relation)
    mapped = ds.training.mapped_triples
    rows_pk = len(torch.unique(mapped[:, :2], dim=0)) + len(torch.unique(mapped[:, [2, 1]], dim=0))
    a, b = interleaved(lambda: nbkit_run()[0], lambda: reference_run()[0], args.repeats)
    per_row = (statistics.median(a) / rows_nb) / (statistics.median(b) / rows_pk)
    return PairResult(
        "kg-train",
        "per epoch",
        a,
        b,
        "PyKEEN pipeline",
        f"{epochs} epochs of rung 6 on UMLS ({len(split.train):,} train triples, each also as its "
        f"reciprocal), width {cfg.complex_dim} real = {cfg.complex_dim // 2} complex, N3 {cfg.complex_n3}, "
        f"Adagrad {cfg.complex_lr}, batches of {cfg.complex_batch}, init std {cfg.complex_init}; "
        f"PyKEEN: {how.split('; ')[0]}; "
        "the median epoch of each run, validation and set-up outside it; 1 thread",
        f"the same {len(ours_train):,} train triples (by name), {epochs} epochs on each side, the same "
        "batch size and width",
        [
            f"rows scored per epoch: nbkit {rows_nb:,} (every triple's tail query and its reciprocal), "
            f"PyKEEN's LCWA {rows_pk:,} (one row per distinct (head, relation), its true tails as "
            f"multi-hot targets); per row scored, nbkit's time ÷ PyKEEN's is {per_row:.2f}",
            f"final training loss: nbkit {loss[-1]:.4f} (cross-entropy per query), PyKEEN "
            f"{result.losses[-1]:.4f} (its LCWA loss): different losses by construction",
        ],
    )


# -- lora-step ---------------------------------------------------------------------------------------------


def pair_lora_step(args) -> PairResult:
    import copy
    import random

    import torch
    from peft import get_peft_model

    from nbkit.audit.checks.kiss import KISS, KissConfig, VariantTrainer, _sft_batches
    from nbkit.audit.checks.lora_binding import lora_config
    from nbkit.audit.context import AuditContext

    one_thread()
    kc = KissConfig()
    ctx = AuditContext("cpu", config="good_smollm2.yaml", model="smollm2", threads=1)
    base, tok = ctx.model_and_tokenizer("smollm2")
    examples, _ = ctx.examples(kc.val_size + kc.batch_size, "kiss-lora")
    seed = ctx.config.model.seed
    order = list(examples)
    random.Random(seed).shuffle(order)  # as the check draws a seed's split
    val_ex, train_ex = order[: kc.val_size], order[kc.val_size :]
    template = ctx.config.template
    device = torch.device("cpu")
    steps = 2 if args.quick else 5  # per repeat and side

    trainer = VariantTrainer(
        base, tok, KISS, train_ex, val_ex, template, batch_size=kc.batch_size, lr=kc.kiss_lr, target=None,
        device=device, seed=seed,
    )  # fmt: skip
    trainer.advance(1)  # its first step measures the peak memory (not a training step's cost): excluded

    torch.manual_seed(seed)  # as VariantTrainer: the same LoRA initialisation
    ref = get_peft_model(copy.deepcopy(base), lora_config(KISS.r, KISS.alpha, KISS.targets, 0.0)).to(device)
    ref.train()
    opt = torch.optim.AdamW([p for p in ref.parameters() if p.requires_grad], lr=kc.kiss_lr)
    batches = _sft_batches(tok, train_ex, template, kc.batch_size, seed)
    ref_losses: list[float] = []

    def ref_step():
        ids, labels, mask = next(batches)
        loss = ref(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        ref_losses.append(float(loss.detach()))

    ref_step()  # the batch nbkit's first (peak-measuring) step took: both now at step 1

    # same work: the next steps see the same batches from the same weights, so their losses agree
    nb_losses = []
    for _ in range(2):
        batch = next(trainer.batches)
        trainer.done += 1
        nb_losses.append(trainer._step(*batch))
        ref_step()
    gap = max(abs(x - y) for x, y in zip(nb_losses, ref_losses[1:], strict=True))
    if gap > 1e-3:
        raise NotSameWork(
            f"lora-step: step losses differ by {gap:.2e} (nbkit {nb_losses}, plain {ref_losses[1:]})"
        )
    shape = tuple(next(_sft_batches(tok, train_ex, template, kc.batch_size, seed))[0].shape)

    def nbkit_run():
        t = time.perf_counter()
        trainer.advance(steps)
        return (time.perf_counter() - t) / steps

    def reference_run():
        t = time.perf_counter()
        for _ in range(steps):
            ref_step()
        return (time.perf_counter() - t) / steps

    a, b = interleaved(nbkit_run, reference_run, args.repeats)
    return PairResult(
        "lora-step",
        "per step",
        a,
        b,
        "transformers + peft loop",
        f"an AdamW step (lr {kc.kiss_lr}) of LoRA q/v r8 on SmolLM2-135M ({next(base.parameters()).dtype}), "
        f"batches of {kc.batch_size} SFT examples (first batch {shape[0]} × {shape[1]} tokens), the same "
        f"batch sequence on both sides; {steps} steps per repeat; 1 thread",
        f"the same LoRA initialisation and batches: the losses of 2 steps agree within {gap:.1e}",
        [
            "nbkit's step runs the LM head on the trained (response) positions only "
            "(nbkit.audit.sft.target_logits); the plain loop computes every position's logits, as "
            "model(..., labels=labels) does"
        ],
    )


# -- lm-token ----------------------------------------------------------------------------------------------


def pair_lm_token(args) -> PairResult:
    import warnings

    from dspy.adapters.json_adapter import _get_structured_outputs_response_format
    from llama_cpp import Llama
    from llama_cpp.server.types import repeat_penalty_field

    from nbkit.model_files import smollm2_gguf_path
    from nbkit.signatures.config import SessionConfig
    from nbkit.signatures.contracts import signature_by_name
    from nbkit.signatures.lm import make_lm
    from nbkit.signatures.server import resolve_server_kind, schema_constraint
    from nbkit.signatures.serving import local_server_kwargs

    sys.path.insert(0, str(Path(__file__).parent))
    from signatures_server import dspy_prompts

    # DSPy's adapters call lm(messages=...) themselves; DSPy 3.4 warns about it on every call
    warnings.filterwarnings("ignore", message="Passing OpenAI-style message", category=DeprecationWarning)
    session = SessionConfig(server=args.lm_server)
    # the request DSPy sends sets the temperature and the token limit; the server applies its defaults to the
    # rest, of which a greedy answer reads the repetition penalty: the in-process call gets the same one
    repeat_penalty = repeat_penalty_field.default
    kind = resolve_server_kind(session.server)
    prompts = dspy_prompts(4 if args.quick else 12)
    schema = _get_structured_outputs_response_format(signature_by_name("typed")).model_json_schema()
    logs = tempfile.mkdtemp(prefix="nbkit-efficiency-lm-")  # the server's log, removed at the end
    server_kwargs = dict(local_server_kwargs(session, "cpu", kind, 1), n_servers=1, n_threads=1, log_dir=logs)
    handle = None
    try:
        handle = make_lm(
            session.lm_model, max_tokens=session.max_tokens, server_kwargs=server_kwargs, cache="off"
        )
        lm = handle.lm.copy(**schema_constraint(kind, schema))
        llama = Llama(
            model_path=str(smollm2_gguf_path()),
            n_ctx=session.n_ctx,
            n_threads=1,
            n_threads_batch=1,
            seed=0,
            verbose=False,
        )

        def nbkit_run():
            texts, tokens = [], 0
            t = time.perf_counter()
            for messages in prompts:
                texts.append(lm(messages=messages)[0])
                tokens += int(lm.history[-1]["usage"]["completion_tokens"])
            return time.perf_counter() - t, texts, tokens

        def reference_run():
            texts, tokens = [], 0
            t = time.perf_counter()
            for messages in prompts:
                out = llama.create_chat_completion(
                    messages=messages,
                    response_format={"type": "json_object", "schema": schema},
                    max_tokens=session.max_tokens,
                    temperature=0.0,
                    repeat_penalty=repeat_penalty,
                    seed=0,
                )
                texts.append(out["choices"][0]["message"]["content"])
                tokens += int(out["usage"]["completion_tokens"])
            return time.perf_counter() - t, texts, tokens

        _, ours, n_ours = nbkit_run()
        n_server = n_ours
        _, theirs, n_theirs = reference_run()
        equal = sum(a == b for a, b in zip(ours, theirs, strict=True))
        # a server may count the end-of-turn token it stopped on as a completion token, llama-cpp-python's
        # Llama does not (both decoded it): at most one token per answer apart
        if equal != len(prompts) or not 0 <= n_ours - n_theirs <= len(prompts):
            raise NotSameWork(
                f"lm-token: {equal} of {len(prompts)} answers equal, completion tokens {n_ours} vs {n_theirs}"
            )
        n_ours = n_theirs  # the same tokens on both sides: one count for both
        a, b = interleaved(
            lambda: nbkit_run()[0] / n_ours, lambda: reference_run()[0] / n_theirs, args.repeats
        )
    finally:
        if handle is not None:
            handle.close()
        import shutil

        shutil.rmtree(logs, ignore_errors=True)
    return PairResult(
        "lm-token",
        "per completion token",
        a,
        b,
        "llama-cpp-python Llama in-process",
        f"{len(prompts)} of notebook 03's prompts (DSPy's JSON adapter, typed signature; ~400 prompt tokens "
        f"each, one shared instruction prefix), its JSON-schema grammar, greedy, max_tokens "
        f"{session.max_tokens}, repetition penalty {repeat_penalty}, one after another; "
        f"nbkit: dspy.LM → {kind} server (1 server, 1 thread), "
        "cache off; reference: Llama.create_chat_completion, 1 thread; time per completion token, prompt "
        "processing included",
        f"all {len(prompts)} answers equal text for text, {n_theirs} completion tokens (the server counts "
        f"{n_server}, its stop tokens included)",
    )


# -- compile -----------------------------------------------------------------------------------------------


def pair_compile(args) -> PairResult:
    import logging

    import dspy
    from dspy.teleprompt import BootstrapFewShot

    from nbkit.signatures.cases import compile_mix
    from nbkit.signatures.compiling import compile_program
    from nbkit.signatures.config import CompileConfig
    from nbkit.signatures.context import SignaturesContext
    from nbkit.signatures.evaluation import make_adapter

    logging.getLogger("dspy").setLevel(logging.CRITICAL)  # parse failures of the teacher's answers: counted
    cc = CompileConfig()
    module = "hybrid"  # the module the default run compiles (the best uncompiled one on the val cases)
    ctx = SignaturesContext("cpu", cache="memory", server=args.lm_server)
    try:
        adapter = ctx.resolve_adapter(cc.adapter)
        lm = ctx.lm_for(adapter)
        plain = lm.copy(cache=False)  # the reference's LM: every request reaches the servers
        mixes = (max(cc.mixes),) if args.quick else tuple(sorted(cc.mixes))
        sets = [compile_mix(ctx.splits.train, cc.compile_size, mix, seed=ctx.seed) for mix in mixes]

        def served(entries) -> int:
            return sum(1 for e in entries if e.get("usage"))

        def nbkit_run():
            dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)  # cold, as a first run
            before = len(lm.history)
            t = time.perf_counter()
            programs = [
                compile_program(
                    "bootstrap",
                    ctx.module(module),
                    compile_set,
                    metric=ctx.metric(),
                    lm=lm,
                    adapter=make_adapter(adapter),
                    max_demos=cc.max_demos,
                    num_threads=ctx.num_threads,
                )
                for compile_set in sets
            ]
            return time.perf_counter() - t, programs, served(lm.history[before:])

        def reference_run():
            before = len(plain.history)
            t = time.perf_counter()
            programs = []
            quiet = contextlib.redirect_stdout(io.StringIO())  # DSPy prints a line per bootstrap
            for compile_set in sets:
                with dspy.context(lm=plain, adapter=make_adapter(adapter)), quiet:
                    optimizer = BootstrapFewShot(
                        metric=ctx.metric(),
                        max_bootstrapped_demos=cc.max_demos,
                        max_labeled_demos=cc.max_demos,
                        max_rounds=1,
                        max_errors=len(compile_set) + 1,
                    )
                    student = ctx.module(module).reset_copy()
                    programs.append(optimizer.compile(student, trainset=list(compile_set)))
            return time.perf_counter() - t, programs, served(plain.history[before:])

        _, ours, n_ours = nbkit_run()
        _, theirs, n_theirs = reference_run()
        differ = [m for m, a, b in zip(mixes, ours, theirs, strict=True) if a.dump_state() != b.dump_state()]
        if differ:
            raise NotSameWork(f"compile: the compiled programs differ (colloquial shares {differ})")
        a, b = interleaved(lambda: nbkit_run()[0], lambda: reference_run()[0], args.repeats)
    finally:
        ctx.close()
    width = ctx.num_threads
    return PairResult(
        "compile",
        "per compile of the default run's set" + ("s" if len(sets) > 1 else ""),
        a,
        b,
        "DSPy's BootstrapFewShot pass",
        f"BootstrapFewShot (max {cc.max_demos} bootstrapped + {cc.max_demos} labelled demos, 1 round) of "
        f"notebook 03's {module} module on the default run's compile set{'s' if len(sets) > 1 else ''} "
        f"({cc.compile_size} training cases, colloquial share {', '.join(f'{m:.0%}' for m in mixes)}), its "
        f"{adapter} adapter, the local servers ({ctx.llm.serving()}); nbkit: compile_program, the teacher's "
        f"requests {width} at a time ahead of DSPy's pass, from a cold in-run cache; reference: DSPy's own "
        "pass, one request at a time, no cache",
        f"the same compiled programs (demos and state equal); requests served: nbkit {n_ours}, DSPy's pass "
        f"{n_theirs} (nbkit's at most {width - 1} more per compile: requests sent ahead that the pass, "
        "having its demos, never read)",
    )


# -- zero-step ---------------------------------------------------------------------------------------------


def zero_rank(spec_path: str) -> int:
    """One rank of the zero-step pair: the ladder's monitored rung and a bare engine, interleaved."""
    import io

    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out_dir"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from nbkit.zero.worker import _quiet_deepspeed, _skip_autotuner_mlflow

    _quiet_deepspeed()
    _skip_autotuner_mlflow()  # as the ladder's ranks
    import torch

    torch.manual_seed(spec["seed"])
    torch.set_num_threads(1)
    import deepspeed

    from nbkit.model_files import tiny_llama, tiny_llama_config
    from nbkit.zero.dsconfig import build_config
    from nbkit.zero.worker import _batch, run_rung

    sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None  # as the ladder's ranks: not for training
    deepspeed.init_distributed(dist_backend="gloo")
    device = torch.device("cpu")
    rung = spec["rungs"][0]
    cfg = build_config(rung, spec, world)
    vocab = tiny_llama_config(**spec["model"]).vocab_size
    mb, seq, steps = spec["micro_batch"], spec["seq_len"], spec["steps"]

    class StepEnds(io.StringIO):
        """The rung's progress file: it writes one line as each step ends (after the loss all-reduce)."""

        def __init__(self):
            super().__init__()
            self.t: list[float] = []

        def write(self, text):
            self.t.append(time.perf_counter())
            return super().write(text)

    def nbkit_run():
        ends = StepEnds()
        r = run_rung(rung, spec, rank, world, ends, device)
        return [b - a for a, b in zip(ends.t, ends.t[1:], strict=False)], r["losses"]

    def reference_run():
        model = tiny_llama(seed=spec["seed"], device="cpu", **spec["model"])
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=spec.get("lr", 3e-3), weight_decay=0.0, fused=True
        )
        engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=cfg)
        ends, losses = [], []
        for step in range(steps):
            ids = _batch(step, rank, world, mb, seq, vocab, spec["seed"]).to(engine.device)
            loss = engine(input_ids=ids, labels=ids).loss
            engine.backward(loss)
            engine.step()
            losses.append(float(loss.detach().float()))
            ends.append(time.perf_counter())
        engine.destroy()
        return [b - a for a, b in zip(ends, ends[1:], strict=False)], losses

    # warm-up: the first engine of a process grows the runtime once (the ladder's ranks do the same)
    nbkit_run()
    reference_run()
    rows = []
    for i in range(spec["repeats"]):
        order = (("nbkit", nbkit_run), ("reference", reference_run))
        for side, fn in order if i % 2 == 0 else order[::-1]:
            times, losses = fn()
            rows.append({"repeat": i, "side": side, "step_s": times, "losses": losses})
    (out / f"rank{rank}.json").write_text(json.dumps(rows))
    torch.distributed.destroy_process_group()
    return 0


def pair_zero_step(args) -> PairResult:
    from nbkit.procs import Ranks, free_port
    from nbkit.zero.config import LadderConfig
    from nbkit.zero.ladder import ladder_spec
    from nbkit.zero.monitor import MemoryMonitor, process_tree_rss

    world = 2
    lc = LadderConfig(launches=1, stages=(2,), world_size=world, checkpoint=False, show_persistence=False)
    steps = 8 if args.quick else 20
    out = Path(tempfile.mkdtemp(prefix="nbkit-efficiency-zero-"))
    spec = dict(ladder_spec(lc, "cpu"), steps=steps, out_dir=str(out), repeats=args.repeats)
    (out / "spec.json").write_text(json.dumps(spec))
    env = dict(
        os.environ,
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
        OMP_NUM_THREADS="1",
        DS_ACCELERATOR="cpu",
        MALLOC_MMAP_THRESHOLD_=str(128 * 1024),  # as nbkit.zero.launch gives the ladder's ranks
        PYTHONUNBUFFERED="1",
    )
    cmd = [sys.executable, str(Path(__file__).resolve()), "--zero-rank", str(out / "spec.json")]
    try:
        with Ranks() as ranks:
            for r in range(world):
                ranks.start(r, cmd, dict(env, RANK=str(r), LOCAL_RANK=str(r)), log=out / f"rank{r}.log")
            # the notebook watches the ranks' memory from the kernel while they run: so does this
            pids = [p.pid for p in ranks.procs.values()]
            with MemoryMonitor(process_tree_rss(pids), interval_s=0.25):
                while not ranks.all_done():
                    bad = ranks.failed()
                    if bad:
                        tail = (out / f"rank{bad.rank}.log").read_text(errors="replace")[-2000:]
                        raise RuntimeError(f"zero-step: rank {bad.rank} failed ({bad.reason}):\n{tail}")
                    time.sleep(0.25)
        per_rank = [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]
    finally:
        import shutil

        shutil.rmtree(out, ignore_errors=True)
    # same work: every step's loss equal on both sides, on every rank
    worst = 0.0
    for rows in per_rank:
        nb = [r["losses"] for r in rows if r["side"] == "nbkit"]
        ref = [r["losses"] for r in rows if r["side"] == "reference"]
        worst = max(
            worst, *(abs(x - y) for a, b in zip(nb, ref, strict=True) for x, y in zip(a, b, strict=True))
        )
    if worst > 1e-6:
        raise NotSameWork(f"zero-step: step losses differ by up to {worst:.2e} between the two sides")

    for i, row in enumerate(per_rank[0]):
        step = statistics.mean(statistics.median(rows[i]["step_s"]) for rows in per_rank)
        print(f"      repeat {row['repeat'] + 1}, {row['side']}: {_fmt(step)} per step", flush=True)

    def medians(side):  # per repeat: the median step, averaged over the ranks
        return [
            statistics.mean(statistics.median(rows[i]["step_s"]) for rows in per_rank)
            for i, row in enumerate(per_rank[0])
            if row["side"] == side
        ]

    return PairResult(
        "zero-step",
        "per step",
        medians("nbkit"),
        medians("reference"),
        "bare DeepSpeed engine",
        f"ZeRO stage 2, {world} CPU ranks (gloo, 1 thread each), the ladder's tiny Llama "
        f"({lc.hidden_size} × {lc.num_hidden_layers} layers), micro-batch {lc.micro_batch} × {lc.seq_len} "
        f"tokens, {lc.precision}, bucket {lc.bucket_elements:,}, the same ds_config and batches; a fresh "
        f"engine per repeat on each side, {steps} steps each; the median of each run's steps 2–{steps} (one "
        "step's end to the next's), averaged over the ranks; nbkit's step includes its monitoring (memory "
        "sampling, model-state bytes before and after the gradient reduction, the loss all-reduce, its "
        "progress line)",
        f"every step's loss equal on both sides and both ranks (largest difference {worst:.1e})",
    )


PAIRS = {
    "kg-eval": pair_kg_eval,
    "kg-train": pair_kg_train,
    "lora-step": pair_lora_step,
    "lm-token": pair_lm_token,
    "compile": pair_compile,
    "zero-step": pair_zero_step,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--zero-rank"]:
        return zero_rank(argv[1])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer epochs, steps and prompts per repeat")
    ap.add_argument("--only", nargs="+", choices=list(PAIRS), default=list(PAIRS), metavar="NAME")
    ap.add_argument("--repeats", type=int, default=0, help="interleaved repeats per pair (≥ 5; default 5, 9)")
    ap.add_argument("--json", help="also write every figure to this file")
    ap.add_argument(
        "--lm-server",
        choices=["auto", "llama-server", "llama-cpp-python"],
        default="auto",
        help="lm-token's server kind (auto: notebook 03's choice on this machine)",
    )
    args = ap.parse_args(argv)
    args.repeats = args.repeats or (5 if args.quick else 9)
    if args.repeats < 5:
        ap.error("--repeats must be at least 5")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import warnings

    # PyKEEN's data loaders ask for pinned memory and its batch-size tuner warns about CPU tensors, on
    # every call: noise between the figures
    warnings.filterwarnings("ignore", message=".*pin_memory.*")
    warnings.filterwarnings("ignore", message="Encountered tensors on device_types")
    start = time.perf_counter()
    print(
        f"{len(os.sched_getaffinity(0))} usable cores, load average {os.getloadavg()[0]:.2f} at the start; "
        f"{args.repeats} repeats per pair{' (--quick)' if args.quick else ''}",
        flush=True,
    )
    results, failed = [], []
    for name in args.only:
        print(f"  {name} …", flush=True)
        t = time.perf_counter()
        try:
            results.append(PAIRS[name](args))
        except Exception as exc:  # noqa: BLE001 - one pair failing must not hide the others' figures
            failed.append(name)
            print(f"efficiency {name}: not measured — {type(exc).__name__}: {exc}", flush=True)
            continue
        print("\n".join(results[-1].lines()), flush=True)
        print(f"    ({time.perf_counter() - t:.0f} s, load average {os.getloadavg()[0]:.2f})", flush=True)
    print(
        f"\n{len(results)} of {len(args.only)} pairs measured in {time.perf_counter() - start:.0f} s; "
        f"load average {os.getloadavg()[0]:.2f} at the end"
    )
    for r in results:
        print(r.lines()[0])
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in results], indent=2))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
