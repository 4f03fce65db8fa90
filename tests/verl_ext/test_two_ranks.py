"""Two FSDP ranks on gloo give what one rank gives on the same batch (verl's actor, agent-tune's CPU config).

Slow (62 s wall on 2 cores): :mod:`tests.verl_ext.dp_loss_probe` runs verl's own
``ActorRolloutRefWorker`` (FSDP2 on gloo through the CPU plugin) with world size 1 and then 2 in one Ray
session, on one fixed batch of 8 uneven sequences, and reports per-token log-probs, the PPO loss and the
gradient norm of one update.

Tolerance: everything is fp32. One rank runs the 8 sequences as 2 micro-batches and accumulates the
gradient; two ranks run 4 each and all-reduce it (gloo sums in another order); the loss is normalised by the
global token count either way (verl all-reduces it). Only the order of floating-point sums differs, so the
results differ only by rounding. Measured (2 cores, docs/scale.md): the log-probs and the loss are
bit-identical (each rank's micro-batch holds the same 4 sequences as one of the 1-rank micro-batches), the
gradient norm differs by 1.1e-5 relative (accumulating 2 micro-batches vs all-reducing 2 ranks sums 135M
fp32 gradients in another order). 1e-4 relative leaves room for other CPUs' summation orders and is far
below any real mistake (a loss scaled by the local instead of the global token count is off by ~50%, a
missing gradient all-reduce changes the norm by tens of percent).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RTOL = 1e-4

pytestmark = pytest.mark.slow


def test_two_gloo_ranks_match_one_rank(tmp_path: Path) -> None:
    pytest.importorskip("verl")
    # fp32 compute, so that only the order of floating-point sums differs (the CPU configs' `auto` picks bf16
    # on CPUs with AVX512_BF16; the two-node main-job test runs that precision on two ranks)
    proc = subprocess.run([sys.executable, "-m", "tests.verl_ext.dp_loss_probe", "agent_tune.cpu_precision=fp32"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    result = json.loads([line for line in proc.stdout.splitlines() if line.startswith('{"1"')][-1])
    one, two = result["1"], result["2"]
    # the forward: every response token's log-prob
    assert len(one["log_probs"]) == len(two["log_probs"]) > 50
    assert two["log_probs"] == pytest.approx(one["log_probs"], rel=RTOL, abs=1e-5)
    # the update: the loss over the global batch, and the norm of the (all-reduced) gradient
    assert abs(one["pg_loss"]) > 1e-4 and one["grad_norm"] > 1e-3  # a loss and gradient that depend on the model
    assert two["pg_loss"] == pytest.approx(one["pg_loss"], rel=RTOL, abs=1e-7)
    assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=RTOL)
