"""The rank of a captured process: torch.distributed's process group, else a launcher's environment."""

from __future__ import annotations

import os


def process_group_info(torch) -> dict | None:
    """Backend, rank and world size of the default process group while it exists, else None."""
    dist = getattr(torch, "distributed", None)
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return {"backend": str(dist.get_backend()), "rank": dist.get_rank(), "world_size": dist.get_world_size()}
    except (RuntimeError, ValueError):
        pass
    return None


def environment_info() -> dict | None:
    """RANK / WORLD_SIZE as torchrun (or ``tracekit capture --nproc``) sets them, else None."""
    rank, world = os.environ.get("RANK", ""), os.environ.get("WORLD_SIZE", "")
    if rank.isdigit() and world.isdigit():
        return {"backend": None, "rank": int(rank), "world_size": int(world)}
    return None
