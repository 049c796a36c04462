"""One rank of the ddp-eval check (run as ``python -m nbkit.audit.ddp_worker``; spawned by
nbkit.audit.checks.ddp_eval).

Each scenario wraps a fresh tiny Llama (the same initial weights in every scenario) in DDP, registers
a communication hook that counts all-reduces, and trains with the common loop — ``backward``,
``step``, ``zero_grad`` — for ``--steps`` steps, evaluating every ``--eval-interval`` steps in the
scenario's way. Training batches come from one generator and evaluation batches from another, so
every scenario trains on the same batches and its final weights differ from the ``no_grad`` control's
only through what its evaluation left behind: an eval backward's gradients stay in ``.grad`` until the
next training step adds its own and steps on both.

The first four scenarios evaluate the LM alone (every parameter gets a gradient from an eval
backward): ``no_grad`` (the control), ``grad_no_backward`` (a forward with gradients enabled),
``backward`` and ``backward_no_sync`` (a backward inside ``ddp.no_sync()``). The ``value_head_*``
scenarios train the LM with a value head (LM loss + value loss, as RLHF/PPO-style fine-tunes do) and
evaluate the LM loss alone, which leaves the head without a gradient: ``value_head_no_grad`` is their
control, ``value_head_backward`` the eval backward DDP's reducer refuses (an error of its own, apart
from the pollution), ``value_head_find_unused`` the same with ``find_unused_parameters=True``.
The result is printed as one JSON line prefixed ``NBKIT_DDP_RESULT``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os

from nbkit.model_files import tiny_llama

SCENARIOS = (
    "no_grad",
    "grad_no_backward",
    "backward",
    "backward_no_sync",
    "value_head_no_grad",
    "value_head_backward",
    "value_head_find_unused",
)
# Each scenario's control: the no_grad evaluation of the same model.
CONTROL = {name: "value_head_no_grad" if name.startswith("value_head") else "no_grad" for name in SCENARIOS}
LR = 1e-2


def _model(seed: int, value_head: bool = True):
    import torch

    class WithValueHead(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = tiny_llama(
                seed=seed,
                vocab_size=128,
                hidden_size=32,
                intermediate_size=64,
                num_attention_heads=4,
                num_key_value_heads=2,
            )
            self.value_head = torch.nn.Linear(32, 1) if value_head else None

        def forward(self, ids):
            out = self.lm(input_ids=ids, labels=ids, output_hidden_states=True)
            if self.value_head is None:  # the LM alone: a value of zero adds no parameter and no gradient
                return out.loss, out.loss.new_zeros(ids.shape[0])
            return out.loss, self.value_head(out.hidden_states[-1][:, -1]).squeeze(-1)

    return WithValueHead()


def _flat(module):
    import torch

    return torch.cat([p.detach().reshape(-1).clone() for p in module.parameters()])


def run_scenario(name: str, steps: int, interval: int, seed: int) -> tuple[dict, object]:
    """One scenario on this rank: its counts and error, and its final weights (flat)."""
    import contextlib

    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(seed)
    head = name.startswith("value_head")
    ddp = DDP(_model(seed, value_head=head), find_unused_parameters=name.endswith("find_unused"))
    start = _flat(ddp.module)
    calls = {"train": 0, "eval": 0}
    phase = {"now": "train"}

    def counting_hook(state, bucket):
        calls[phase["now"]] += 1
        return allreduce_hook(None, bucket)

    ddp.register_comm_hook(None, counting_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR)
    rank = dist.get_rank()
    train_gen = torch.Generator().manual_seed(seed + rank)
    eval_gen = torch.Generator().manual_seed(seed + 1000 + rank)
    error = None
    done = 0
    try:
        for step in range(1, steps + 1):
            phase["now"] = "train"
            ids = torch.randint(3, 128, (2, 12), generator=train_gen)
            lm_loss, value = ddp(ids)
            (lm_loss + value.pow(2).mean()).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            done = step
            if step % interval == 0:
                phase["now"] = "eval"
                ids = torch.randint(3, 128, (2, 12), generator=eval_gen)
                ddp.eval()
                if name.endswith("no_grad"):
                    with torch.no_grad():
                        ddp(ids)
                elif name == "grad_no_backward":
                    ddp(ids)
                else:
                    # Eval has no value targets: a diagnostic backward runs through the LM loss only, and
                    # its gradients stay in .grad (the loop zeroes them after the next step, not here).
                    ctx = ddp.no_sync() if name == "backward_no_sync" else contextlib.nullcontext()
                    with ctx:
                        lm_loss, _ = ddp(ids)
                        lm_loss.backward()
                ddp.train()
    except RuntimeError as exc:
        error = str(exc).strip().splitlines()[0]
    end = _flat(ddp.module)
    row = {
        "scenario": name,
        "value_head": head,
        "train_steps_done": done,
        "allreduce_train": calls["train"],
        "allreduce_eval": calls["eval"],
        "error": error,
        "update": float((end - start).abs().max()),
    }
    return row, end


def replica_spread(weights) -> float:
    """The largest difference of one weight between the ranks (0 when the replicas agree), by two
    reductions outside DDP (the counting hook sees only DDP's own)."""
    import torch.distributed as dist

    hi, lo = weights.clone(), -weights
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MAX)
    return float((hi + lo).max())


def main(argv=None) -> int:
    import torch.distributed as dist

    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--eval-interval", type=int, default=2)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=30.0)
    a = ap.parse_args(argv)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    import torch

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", rank=a.rank, world_size=a.world_size, timeout=datetime.timedelta(seconds=a.timeout)
    )
    results = []
    final = {}
    try:
        # Controls first, so every scenario's weights have theirs to be compared with.
        names = a.scenarios.split(",")
        for name in sorted(names, key=lambda n: n != CONTROL[n]):
            row, weights = run_scenario(name, a.steps, a.eval_interval, a.seed)
            dist.barrier()
            final[name] = weights
            control = final.get(CONTROL[name])  # a control is compared with itself: 0
            # A run an error stopped is not compared: its weights stop where the error struck.
            row["max_abs_dw"] = (
                float((weights - control).abs().max()) if control is not None and not row["error"] else None
            )
            row["replicas_max_abs_diff"] = replica_spread(weights)
            results.append(row)
        results.sort(key=lambda r: names.index(r["scenario"]))
    finally:
        print("NBKIT_DDP_RESULT " + json.dumps({"rank": a.rank, "results": results}), flush=True)
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
