"""One rank of the ddp-eval check (run as ``python -m nbkit.audit.ddp_worker``; spawned by
nbkit.audit.checks.ddp_eval).

Each scenario wraps a fresh tiny Llama with a value head (LM loss + value loss in training, as in
RLHF/PPO-style fine-tunes) in DDP, registers a communication hook that counts all-reduces, trains
for ``--steps`` steps and evaluates every ``--eval-interval`` steps in the scenario's way.
``backward_no_head`` is the ``backward`` scenario on the same Llama without the value head, so every
parameter gets a gradient from the eval backward: it tells a reducer error the eval backward causes
from one the value head's unused parameters cause. The result is printed as one JSON line prefixed
``NBKIT_DDP_RESULT``.
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
    "backward_find_unused",
    "backward_no_head",
)


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


def run_scenario(name: str, steps: int, interval: int, seed: int) -> dict:
    import contextlib

    import torch
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(seed)
    ddp = DDP(
        _model(seed, value_head=name != "backward_no_head"),
        find_unused_parameters=(name == "backward_find_unused"),
    )
    calls = {"train": 0, "eval": 0}
    phase = {"now": "train"}

    def counting_hook(state, bucket):
        calls[phase["now"]] += 1
        return allreduce_hook(None, bucket)

    ddp.register_comm_hook(None, counting_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(seed + torch.distributed.get_rank())
    error = None
    done = 0
    try:
        for step in range(1, steps + 1):
            phase["now"] = "train"
            ids = torch.randint(3, 128, (2, 12), generator=gen)
            lm_loss, value = ddp(ids)
            (lm_loss + value.pow(2).mean()).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            done = step
            if step % interval == 0:
                phase["now"] = "eval"
                ids = torch.randint(3, 128, (2, 12), generator=gen)
                if name == "no_grad":
                    with torch.no_grad():
                        ddp(ids)
                elif name == "grad_no_backward":
                    ddp(ids)
                else:
                    # Eval has no value targets: the diagnostic backward runs through the LM loss only.
                    ctx = ddp.no_sync() if name == "backward_no_sync" else contextlib.nullcontext()
                    with ctx:
                        lm_loss, _ = ddp(ids)
                        lm_loss.backward()
                    opt.zero_grad(set_to_none=True)
    except RuntimeError as exc:
        error = str(exc).strip().splitlines()[0]
    return {
        "scenario": name,
        "train_steps_done": done,
        "allreduce_train": calls["train"],
        "allreduce_eval": calls["eval"],
        "error": error,
    }


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
    try:
        for name in a.scenarios.split(","):
            results.append(run_scenario(name, a.steps, a.eval_interval, a.seed))
            dist.barrier()
    finally:
        print("NBKIT_DDP_RESULT " + json.dumps({"rank": a.rank, "results": results}), flush=True)
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
