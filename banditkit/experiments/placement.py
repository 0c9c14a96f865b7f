"""Where a sweep's lanes run: one global mesh over ``jax.devices()`` of every process.

A *lane* is one (configuration, seed) pair.  The lane axis, padded to a multiple of the device count, is sharded
over a 1-D :class:`jax.sharding.Mesh` of all devices of all processes (``("lanes",)``): with ``D`` devices and
``L`` padded lanes each device runs ``L / D`` lanes.  On one process the mesh is its local devices; after
:func:`initialize` (JAX's multi-process runtime, ``jax.distributed``) it spans every process, each process runs
the lanes on its own devices, and :func:`gather` brings every lane's outputs to every process (a collective), so
any process can build the frame and process 0 (:func:`is_writer`) writes the files.

Every process must make the same calls in the same order (JAX's multi-controller model): the same sweep, grid,
seeds and steps.
"""

from __future__ import annotations

import math
import os
from typing import Any

import jax
import numpy as np

#: environment variables that name the coordinator when :func:`initialize` is called without arguments (besides
#: those JAX itself reads from cluster launchers: SLURM, Open MPI, Kubernetes, Cloud TPU)
ENV_COORDINATOR = "BANDITKIT_COORDINATOR"  # host:port of process 0
ENV_NUM_PROCESSES = "BANDITKIT_NUM_PROCESSES"
ENV_PROCESS_ID = "BANDITKIT_PROCESS_ID"


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, **kwargs: Any) -> None:
    """Join the multi-process runtime (``jax.distributed.initialize``) unless it is already up.

    Arguments left ``None`` come from :data:`ENV_COORDINATOR` / :data:`ENV_NUM_PROCESSES` / :data:`ENV_PROCESS_ID`
    when set, else from what JAX detects in the cluster launcher's environment (SLURM, Open MPI, ...).  On CPU the
    cross-process collectives use gloo.  Call it before any other JAX computation, in every process."""
    if jax.distributed.is_initialized():
        return
    coordinator_address = coordinator_address or os.environ.get(ENV_COORDINATOR)
    if num_processes is None and os.environ.get(ENV_NUM_PROCESSES):
        num_processes = int(os.environ[ENV_NUM_PROCESSES])
    if process_id is None and os.environ.get(ENV_PROCESS_ID):
        process_id = int(os.environ[ENV_PROCESS_ID])
    try:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except (AttributeError, ValueError):  # a JAX without the option has its own CPU collectives (or none)
        pass
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id, **kwargs)


class Placement:
    """The lane axis over the global mesh: ``padded`` lanes (a multiple of ``devices``); ``lanes`` / ``replicated``
    are the shardings of a lane-major array and of an array every device holds whole (``None`` on one device)."""

    def __init__(self, n_lanes: int):
        devices = jax.devices()
        self.devices = len(devices)
        self.processes = jax.process_count()
        self.padded = int(math.ceil(n_lanes / self.devices) * self.devices)
        if self.devices == 1:
            self.lanes = self.replicated = None
            return
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        mesh = Mesh(np.array(devices), ("lanes",))
        self.lanes = NamedSharding(mesh, PartitionSpec("lanes"))
        self.replicated = NamedSharding(mesh, PartitionSpec())

    def put(self, host: Any, replicate: bool = False) -> Any:
        """Host arrays (the same on every process) onto the mesh: split along the lane axis, or whole on every
        device (``replicate``)."""
        sharding = self.replicated if replicate else self.lanes
        return host if sharding is None else jax.device_put(host, sharding)


def gather(tree: Any) -> Any:
    """Every leaf as a NumPy array holding all lanes, on every process (a collective when the mesh spans
    processes: every process must call it)."""
    leaves = jax.tree_util.tree_leaves(tree)
    if jax.process_count() > 1 and any(isinstance(x, jax.Array) and not x.is_fully_addressable for x in leaves):
        from jax.experimental import multihost_utils

        return jax.tree_util.tree_map(np.asarray, multihost_utils.process_allgather(tree, tiled=True))
    return jax.tree_util.tree_map(np.asarray, jax.device_get(tree))


def is_writer() -> bool:
    """Whether this process writes files (process 0)."""
    return jax.process_index() == 0
