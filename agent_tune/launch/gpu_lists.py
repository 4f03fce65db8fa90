"""Check the GPU lists of a launch script that shares one node between the trainer and a served model.

    python -m agent_tune.launch.gpu_lists --train-gpus 0,1,2,3 --user-gpus 4,5 --config-name agent_tune_tau2 \\
        -- key=value ...

``examples/run_grpo_tau2.sh`` serves tau2's user simulator on some GPUs and trains on others, keeping them
apart only through ``CUDA_VISIBLE_DEVICES``. That holds only for a Ray cluster the trainer starts itself: a
cluster that is already running (``RAY_ADDRESS``, ``ray_kwargs.ray_init.address``, or the one a ``ray start``
on this machine recorded, which ``ray.init()`` joins by default) hands out its own GPUs, the user server's
included. :func:`check_gpu_lists` fails before anything starts when the lists overlap, when the trainer's
count is not the config's ``trainer.n_gpus_per_node`` (on one node), or when the run would join such a
cluster; the exit code is then 2 and the message names the variables and keys.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from agent_tune.errors import ConfigError, exit_code
from agent_tune.launch.cluster import cluster_address


def parse_gpus(text: str, name: str) -> list[int]:
    """A comma-separated GPU list (``0,1,2``) as ints; ``name`` (the variable) is named when it is malformed."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items or not all(item.isdigit() for item in items):
        raise ConfigError(f"{name}={text!r}: expected GPU indices separated by commas, e.g. 0,1,2,3")
    gpus = [int(item) for item in items]
    if len(set(gpus)) != len(gpus):
        raise ConfigError(f"{name}={text!r}: a GPU is listed twice")
    return gpus


def ray_address_file() -> Path | None:
    """Where ``ray start`` records the cluster that a plain ``ray.init()`` on this machine joins (None when
    this Ray does not say)."""
    try:
        from ray._common.utils import get_ray_address_file
    except ImportError:
        return None
    return Path(get_ray_address_file(None))


def running_cluster(config: DictConfig, environ: Mapping[str, str] | None = None,
                    address_file: Path | None = None) -> str | None:
    """The address of an already-running Ray cluster the trainer would join, and where it comes from; None
    when the trainer starts its own."""
    address = cluster_address(config, environ)
    if address is not None:
        return f"{address} (RAY_ADDRESS or ray_kwargs.ray_init.address)"
    if address_file is not None and address_file.is_file():
        recorded = address_file.read_text().strip()
        if recorded:
            return f"{recorded} (recorded by `ray start` in {address_file})"
    return None


def check_gpu_lists(config: DictConfig, train_gpus: Sequence[int], user_gpus: Sequence[int] = (),
                    environ: Mapping[str, str] | None = None, address_file: Path | None = None) -> None:
    """Fail when the trainer's GPUs (``TRAIN_GPUS``) and the user server's (``USER_GPUS``) overlap, when the
    trainer's count differs from ``trainer.n_gpus_per_node`` or ``trainer.nnodes`` is not 1, or when the
    trainer would join an already-running Ray cluster (which ignores ``CUDA_VISIBLE_DEVICES``).

    Raises:
        ConfigError: naming the variables, keys and values.
    """
    shared = sorted(set(train_gpus) & set(user_gpus))
    if shared:
        raise ConfigError(f"TRAIN_GPUS={_join(train_gpus)} and USER_GPUS={_join(user_gpus)} share GPU(s) "
                          f"{_join(shared)}: the trainer and the user simulator need GPUs of their own")
    nnodes = OmegaConf.select(config, "trainer.nnodes", default=1)
    if nnodes != 1:
        raise ConfigError(f"config key 'trainer.nnodes'={nnodes}: TRAIN_GPUS picks GPUs of this node only; this "
                          "script runs on one node (set trainer.nnodes=1)")
    per_node = OmegaConf.select(config, "trainer.n_gpus_per_node", default=None)
    if per_node != len(train_gpus):
        raise ConfigError(f"TRAIN_GPUS={_join(train_gpus)} holds {len(train_gpus)} GPU(s) but config key "
                          f"'trainer.n_gpus_per_node' is {per_node}: make them match (GPUS_PER_NODE overrides the "
                          "key)")
    joined = running_cluster(config, environ, address_file)
    if joined is not None:
        raise ConfigError(f"a Ray cluster is already running at {joined}: the trainer would join it and take its "
                          "GPUs, the user simulator's included, whatever CUDA_VISIBLE_DEVICES says; stop it "
                          "(`ray stop`), unset RAY_ADDRESS, or run without this script")


def _join(gpus: Sequence[int]) -> str:
    return ",".join(str(g) for g in gpus)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None,
         address_file: Path | None = None) -> int:
    """Parse the lists, compose ``--config-name`` with the overrides after ``--`` (options among them, such as
    ``--verbose``, are skipped) and check; print the error and return 2 on failure, 0 otherwise."""
    parser = argparse.ArgumentParser(prog="python -m agent_tune.launch.gpu_lists", description=__doc__.split("\n")[0])
    parser.add_argument("--train-gpus", required=True, help="the trainer's GPUs (TRAIN_GPUS), e.g. 0,1,2,3")
    parser.add_argument("--user-gpus", default="", help="the served model's GPUs (USER_GPUS); empty: none here")
    parser.add_argument("--config-name", required=True)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as given to agent-tune train")
    args = parser.parse_args(argv)
    environ = os.environ if environ is None else environ
    from agent_tune.launch.compose import compose_config

    try:
        train = parse_gpus(args.train_gpus, "TRAIN_GPUS")
        user = parse_gpus(args.user_gpus, "USER_GPUS") if args.user_gpus.strip() else []
        overrides = [item for item in args.overrides if not item.startswith("-")]
        config = compose_config(args.config_name, overrides)
        check_gpu_lists(config, train, user, environ,
                        address_file if address_file is not None else ray_address_file())
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
