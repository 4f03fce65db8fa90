"""Sync vs async GRPO on the CPU main job: samples/s, step time and mean reward, the same number of samples.

Runs ``agent-tune train --config-name agent_tune_bfcl_cpu`` twice on the same BFCL data (built once, 3 shots,
as ``examples/run_grpo_bfcl_cpu.sh`` does): once as it is (verl's v1 trainer, sync) and once with an async
recipe from ``config/async/`` (``--mode``: ``colocate_async``, the v1 trainer's colocated async mode;
``one_step_off_policy_cpu`` or ``fully_async_policy_cpu``, verl's experimental trainers with a separate
rollout pool). Both runs train on ``--steps`` x 2 prompts x 4 samples and save no checkpoint.

Reported per run, from ``<run>/metrics.jsonl`` (one row per trainer step: ``agent_tune.launch.step_metrics``), verl's
``<run>/verl_metrics.jsonl`` and the run's wall clock:

- ``train s``: verl's mean step time (``timing_s/step`` in ``<run>/verl_metrics.jsonl``: for the async
  trainers this includes the wait for samples) x the steps trained: the training phase's wall time, start-up
  excluded (the sync and one-step-off trainers log every step; verl's fully-async trainer logs all but its
  last);
- ``samples/s``: samples trained on / ``train s``; ``end-to-end samples/s``: / the whole run's wall time;
- ``step s``: mean step time; ``reward``: mean reward over all samples.

Then the async/sync ratios (each side's summary is kept in ``<work>/summary_<run>.json``: ``--only async``
then ``--only sync`` gives the same table as one call). Not part of CI (tens of minutes on 2 cores); heavy:
run it alone.

    python benchmarks/async_vs_sync.py [--mode colocate_async] [--steps 4] [--work /tmp/async_vs_sync] \
        [--shots 3] [--only sync|async] [hydra overrides for both runs ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[1]
MODES = ("colocate_async", "one_step_off_policy_cpu", "fully_async_policy_cpu")
PROMPTS_PER_STEP = 2
SAMPLES_PER_PROMPT = 4


def build_data(out: Path, shots: int = 3) -> Path:
    """The main job's BFCL splits (``shots`` worked examples per training row; the main job's 3 by default),
    built once."""
    if not (out / "train_base.parquet").is_file():
        subprocess.run([sys.executable, str(REPO / "data_preprocess" / "bfcl.py"), "--out", str(out),
                        "--shots", str(shots)], cwd=REPO, check=True)
    return out


def run(name: str, work: Path, data: Path, steps: int, extra: Sequence[str]) -> dict:
    """One training run; its per-step rows and wall time."""
    ckpt = work / name
    cmd = [sys.executable, "-m", "agent_tune.launch.train", "--config-name", "agent_tune_bfcl_cpu",
           f"data.train_files={data / 'train_base.parquet'}", f"data.val_files={data / 'val.parquet'}",
           f"trainer.default_local_dir={ckpt}", f"trainer.total_training_steps={steps}", "trainer.save_freq=-1",
           "trainer.resume_mode=disable", *extra]
    print(f"[{name}] {' '.join(cmd[2:])}", flush=True)
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"[{name}] exited {proc.returncode}; log: {ckpt / 'train.log'}")
    return {"name": name, "rows": _jsonl(ckpt / "metrics.jsonl"), "verl_rows": _jsonl(ckpt / "verl_metrics.jsonl"),
            "wall_s": wall}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summary(result: dict, steps: int) -> dict:
    """Throughput over the samples trained on (``steps`` x prompts x group size: the same in both runs). The
    rows group the episodes by the step that trains them (``verl_ext.agent_loop.sample_step``); episodes an
    async run generated ahead and never trained on have no row. The mean reward is over the rows' episodes."""
    rows = result["rows"]
    samples = steps * PROMPTS_PER_STEP * SAMPLES_PER_PROMPT
    generated = sum(int(r.get("samples", 0)) for r in rows)
    # step times from verl's own log (metrics.jsonl has a row only where episodes were filed). verl's
    # fully-async trainer logs a step's times one step late and never logs its last step's (measured:
    # 3 steps trained, 2 timing rows), so the training time is the mean logged step time x steps
    times = [float(r["data"]["timing_s/step"]) for r in result["verl_rows"] if "timing_s/step" in r.get("data", {})]
    train_s = sum(times) / len(times) * steps if times else 0.0
    reward = sum(float(r.get("reward", 0.0)) * int(r.get("samples", 0)) for r in rows) / max(generated, 1)
    return {"run": result["name"], "steps": steps, "samples": samples, "train_s": train_s,
            "step_s": train_s / max(steps, 1), "samples_per_s": samples / train_s if train_s else 0.0,
            "e2e_samples_per_s": samples / result["wall_s"], "wall_s": result["wall_s"], "reward": reward}


def async_overrides(mode: str, steps: int) -> list[str]:
    """The async recipe, sized to train on the same samples as the sync run."""
    extra = [f"+async={mode}"]
    if mode.startswith("fully_async"):
        # verl's fully-async trainer counts steps from the prompts the rollouter produces
        extra.append(f"rollout.total_rollout_steps={steps * PROMPTS_PER_STEP}")
    return extra


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES, default="colocate_async")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--work", type=Path, default=Path("/tmp/async_vs_sync"))
    parser.add_argument("--shots", type=int, default=3,
                        help="worked examples per training row (3: the main job; 0: shorter prompts, faster updates)")
    parser.add_argument("--only", choices=("sync", "async"), default=None,
                        help="run one side only; the ratio is printed once both sides have run in --work")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for both runs")
    args = parser.parse_args(argv)
    data = build_data(args.work / ("data" if args.shots == 3 else f"data_shots{args.shots}"), args.shots)
    for side in ("sync", "async"):
        if args.only in (None, side):
            name = "sync" if side == "sync" else args.mode
            extra = list(args.overrides) + (async_overrides(args.mode, args.steps) if side == "async" else [])
            row = summary(run(name, args.work, data, args.steps, extra), args.steps)
            (args.work / f"summary_{name}.json").write_text(json.dumps(row))
    # the two sides: this call's runs, or an earlier call's (--only) with the same --work
    rows = {}
    for side, name in (("sync", "sync"), ("async", args.mode)):
        path = args.work / f"summary_{name}.json"
        if path.is_file():
            rows[side] = json.loads(path.read_text())
    cols = ("run", "steps", "samples", "train_s", "step_s", "samples_per_s", "e2e_samples_per_s", "wall_s", "reward")
    print("\n" + " | ".join(f"{c:>17}" for c in cols))
    for row in rows.values():
        print(" | ".join(f"{row[c]:>17.3f}" if isinstance(row[c], float) else f"{row[c]:>17}" for c in cols))
    if len(rows) < 2 or rows["sync"]["steps"] != rows["async"]["steps"]:
        print("(no ratio: the other side has not run with these --steps in this --work)")
        return 0
    sync, asyn = rows["sync"], rows["async"]
    ratio = {k: asyn[k] / sync[k] if sync[k] else float("nan") for k in ("samples_per_s", "e2e_samples_per_s",
                                                                          "step_s")}
    print(f"\nasync/sync: samples/s {ratio['samples_per_s']:.2f}x, end-to-end samples/s "
          f"{ratio['e2e_samples_per_s']:.2f}x, step time {ratio['step_s']:.2f}x; mean reward sync "
          f"{sync['reward']:.3f}, async {asyn['reward']:.3f}")
    print(json.dumps({"sync": sync, "async": asyn, "ratio": ratio}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
