"""What notebook 02's experiments share: :class:`ZeroContext`, opened one way —
``ZeroContext(DEVICE, smoke=SMOKE, profile=PROFILE, world_size=WORLD_SIZE)``."""

from __future__ import annotations

from typing import Any

from nbkit.claims import DEFAULT
from nbkit.errors import UsageError
from nbkit.experiment import Context
from nbkit.model_files import load_model, load_smollm2, load_tokenizer

CPU_RANKS = 2  # rank processes a CPU ladder starts at most: each holds a full runtime and a core


class ZeroContext(Context):
    """The device (resolved once; the only place it is set), the user's plan of ``world_size`` GPUs and
    how many ranks this machine runs for it, and the speculative-decoding model once loaded."""

    def __init__(
        self, device: str = "auto", *, smoke: bool = False, profile: str = DEFAULT, world_size: int = 8
    ) -> None:
        super().__init__(device, smoke=smoke, profile=profile)
        self.world_size = world_size

    @property
    def gpus(self) -> int:
        """Local CUDA devices usable here (0 unless the context's device resolves to CUDA)."""
        import torch

        return torch.cuda.device_count() if self.torch_device.type == "cuda" else 0

    @property
    def ranks(self) -> int:
        """Ranks this machine runs for the plan: one per local GPU when there are at least two, else
        ``CPU_RANKS`` CPU ranks (never more than the plan); the memory model and the ds_config check
        keep the plan's full ``world_size``."""
        gpus = self.gpus
        return max(1, min(self.world_size, gpus if gpus >= 2 else CPU_RANKS))

    @property
    def drill_ranks(self) -> int:
        """Ranks of the failure drill and the size sweep: the ladder's, at least two."""
        return max(2, self.ranks)

    @property
    def drill_rank(self) -> int:
        """The rank the failure drill kills: the last one."""
        return self.drill_ranks - 1

    def ranks_device(self, world_size: int) -> str:
        """The device type of ``world_size`` ranks: one GPU per rank, else — only when the context's
        device is ``auto`` — CPU ranks (gloo). A CUDA device named explicitly with too few GPUs is a
        usage error."""
        device = self.torch_device
        if device.type == "cuda" and self.gpus < world_size:
            if self.device != "auto":
                raise UsageError(
                    f"world_size: {world_size} ranks need {world_size} GPUs (one per rank); this machine "
                    f"has {self.gpus}"
                )
            return "cpu"
        return device.type

    def causal_lm(self, model_path: str) -> tuple[Any, Any]:
        """(model, tokenizer) of ``model_path`` ('' = SmolLM2) on the context's device, loaded once."""
        device = self.torch_device

        def load() -> tuple[Any, Any]:
            if model_path:
                return load_model(model_path, device), load_tokenizer(model_path)
            return load_smollm2(device)

        return self.cached(("causal_lm", model_path), load)
