"""The process group grpo trains in: a world of one outside a launcher, DeepSpeed's comm on gloo
(CPU) or NCCL, and leaving it together at the end of a run."""

from __future__ import annotations

import os
import socket
from typing import NoReturn

from endstate.core.console import stdio
from endstate.core.errors import EndstateError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_distributed(device: str) -> tuple[int, int]:
    """(rank, world size). Outside a launcher this process is a world of one (DeepSpeed would
    otherwise look for mpi4py). Must run before deepspeed is imported on CPU."""
    if device == "cpu":
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=os.environ.get("MASTER_PORT") or str(_free_port()))
    try:
        import deepspeed
    except ImportError:
        raise EndstateError("grpo needs deepspeed: DS_BUILD_OPS=0 pip install --no-build-isolation "
                            "deepspeed (after torch; or pip install 'endstate[train]')") from None
    import torch.distributed as dist

    if not dist.is_initialized():
        if device == "cpu":
            _without_shm_op()
        deepspeed.init_distributed(dist_backend="gloo" if device == "cpu" else "nccl",
                                   verbose=False)
    return dist.get_rank(), dist.get_world_size()


def _without_shm_op() -> None:
    """DeepSpeed's CPU backend compiles a shared-memory all-reduce op as it starts (C++, built
    just in time: ~30 s and a compiler on a machine's first grpo run) that only its inference
    all-reduce uses; training's collectives go through torch.distributed (gloo). Listed as not
    compatible (deepspeed.ops.__compatible_ops__, what its loader asks), it is not built."""
    import deepspeed.ops

    compatible = getattr(deepspeed.ops, "__compatible_ops__", None)
    if isinstance(compatible, dict):
        compatible["deepspeed_shm_comm"] = False


def leave_distributed(*engines) -> None:
    """Leave the process group together: each engine destroyed (its hooks and buffers), a barrier
    (every rank's collectives and writes are done), then the group destroyed through DeepSpeed,
    which also drops its own module-level references to it. A launched rank must then end with
    `end_rank`: see there."""
    import deepspeed.comm
    import torch.distributed as dist

    for engine in engines:
        if hasattr(engine, "destroy"):  # a KL reference outside ZeRO-3 is a plain module
            engine.destroy()
    dist.barrier()
    deepspeed.comm.destroy_process_group()


def end_rank(status: int = 0) -> NoReturn:
    """End a launched rank's process at once, after flushing its streams. DeepSpeed's ZeRO
    engines stay reachable after destroy() (their hooks sit on autograd nodes, which the garbage
    collector cannot see), and with them the world gloo group and DeepSpeed's clone of it: two
    gloo_tcp_loop and four pt_gloo_runloop threads per rank outlive destroy_process_group. A
    normal interpreter exit tears those groups down in C++ static destructors while the threads
    still run and the peer rank is exiting too, which aborted a rank (SIGABRT) about once in
    three CI runs. os._exit skips that teardown: the kernel ends the threads with the process."""
    import logging

    stdio.flush()
    logging.shutdown()
    os._exit(status)
