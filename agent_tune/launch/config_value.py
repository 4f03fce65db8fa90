"""Print one value of a composed agent-tune config, for launch scripts that chain stages.

    python -m agent_tune.launch.config_value --config-name agent_tune_tau2_cpu agent_tune.template [override ...]

A scalar prints as it is (``smollm2_tools``), a mapping or list as JSON (``agent_tune.env_kwargs.tau2``), a
missing key or null as nothing with exit status 3. Overrides are Hydra's, as for ``agent-tune train``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from omegaconf import OmegaConf

from agent_tune.errors import ConfigError, exit_code
from agent_tune.launch.compose import compose_config


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_tune.launch.config_value", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-name", "-cn", required=True)
    parser.add_argument("--config-dir", "-cd", default=None)
    parser.add_argument("key")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    try:
        config = compose_config(args.config_name, args.overrides, args.config_dir)
    except ConfigError as exc:
        print(f"config {args.config_name}: {exc}", file=sys.stderr)
        return exit_code(exc)
    value = OmegaConf.select(config, args.key, default=None)
    if value is None:
        print(f"config {args.config_name} has no value at {args.key!r}", file=sys.stderr)
        return 3
    if OmegaConf.is_config(value):
        print(json.dumps(OmegaConf.to_container(value, resolve=True)))
    else:
        print(value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
