"""T3RL's debugging modes end to end on CPU: a rollout-only step, then that step replayed through an update.

Two trainer runs of ``agent_tune_toolcall_cpu`` (SmolLM2-135M, the synthetic arithmetic tool-call rows, 2 rows x
2 samples, one step each): ``+debug=rollout_only`` plays the rows through verl's v1 trainer loop with agent-tune's
agent loop, dumps every sample and skips the update; ``+debug=replay`` trains step 1 on that dump without
generating. Prints the two runs side by side (samples, verl's batch, response length, score, the actor's grad
norm) and checks what must hold: the dump is complete (tokens, mask, log-probs, reward, metrics per sample),
rollout-only updated and saved nothing, verl's own rollout dump of the batch it trained on is the same in both
runs, and only the replay updated the actor. Exit 1 naming the first check that failed.

Not part of CI (two trainer start-ups of its own): CI checks the modes end to end on the mixed-env run,
``tests/launch/test_mixed_envs_e2e.py`` (2 steps of 4 envs dumped, then replayed), and the dump -> replay round
trip in ``tests/verl_ext/test_replay_loop.py``. Run it alone:

    python examples/cpu/debug_modes_cpu.py [--work /tmp/debug_modes]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from agent_tune.rollout.dump import dumped_steps, read_step_dump  # noqa: E402

ROWS, N = 2, 2
# one micro batch holds the step's ROWS x N samples (verl asserts it divides them)
MICRO_BATCH_KEYS = ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
                    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu")


class CheckFailed(AssertionError):
    """A property the debugging modes must have does not hold."""


def check(ok: bool, what: str) -> None:
    if not ok:
        raise CheckFailed(what)


def train(work: Path, name: str, data: Path, *overrides: str) -> tuple[Path, float]:
    """One trainer run (one step); its run folder and wall seconds. Its console goes to ``<work>/<name>.log``."""
    out = work / name
    cmd = [sys.executable, "-m", "agent_tune.launch.train", "--config-name", "agent_tune_toolcall_cpu",
           f"data.train_files={data / 'train.parquet'}", f"data.val_files={data / 'val.parquet'}",
           f"trainer.default_local_dir={out}", "trainer.total_training_steps=1",
           f"data.train_batch_size={ROWS}", f"actor_rollout_ref.actor.ppo_mini_batch_size={ROWS}",
           f"actor_rollout_ref.rollout.n={N}", *(f"{k}={ROWS * N}" for k in MICRO_BATCH_KEYS), *overrides]
    start = time.monotonic()
    with (work / f"{name}.log").open("w") as f:
        code = subprocess.run(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT).returncode
    check(code == 0, f"the {name} run exited {code} (see {work / f'{name}.log'} and {out / 'train.log'})")
    return out, time.monotonic() - start


def verl_step(out: Path) -> dict:
    rows = [json.loads(line) for line in (out / "verl_metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [row["data"] for row in rows if "timing_s/step" in row["data"]]
    check(len(steps) == 1, f"{out}: {len(steps)} trainer steps logged, expected 1")
    return steps[0]


def verl_batch(out: Path) -> list[tuple[str, str, float]]:
    """The batch verl trained on at step 1, as its own rollout dump has it (uids differ between runs)."""
    rows = [json.loads(line) for line in (out / "rollouts" / "1.jsonl").read_text().splitlines() if line.strip()]
    return sorted((r["input"], r["output"], float(r["score"])) for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/debug_modes"))
    args = parser.parse_args(argv)
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    data = work / "data"
    subprocess.run([sys.executable, str(REPO / "data_preprocess" / "toolcall.py"), "--synthetic", "arith", "--n", "4",
                    "--val-size", "2", "--out", str(data)], check=True, cwd=REPO, capture_output=True)
    try:
        first, first_s = train(work, "rollout_only", data, "+debug=rollout_only")
        dump = first / "rollout_dump"
        check(dumped_steps(dump) == [1], f"{dump}: steps {dumped_steps(dump)} dumped, expected [1]")
        records = read_step_dump(dump, 1)
        check(len(records) == ROWS * N and {s for _, s in records} == set(range(N)),
              f"{len(records)} samples dumped, expected {ROWS} rows x {N}")
        for rec in records.values():
            check(len(rec["response_ids"]) == len(rec["response_mask"]) == len(rec["response_logprobs"]) > 0
                  and any(rec["response_mask"]) and bool(rec["prompt_ids"]), "a dumped sample lacks its tokens")
            check(rec["sample_record"]["global_steps"] == 1 and rec["sample_record"]["reward"] == rec["reward"],
                  "a dumped sample's record disagrees with its reward or step")
        ro = verl_step(first)
        check(not any(k.startswith(("actor/pg_loss", "actor/grad_norm")) for k in ro), "rollout-only updated")
        check(not list(first.glob("global_step_*")), "rollout-only saved a checkpoint")

        second, second_s = train(work, "replay", data, "+debug=replay", f"agent_tune.debug.replay_dir={dump}")
        rp = verl_step(second)
        same_batch = verl_batch(second) == verl_batch(first)
        print(f"{'':28}{'rollout-only':>14}{'replay':>14}")
        print(f"{'samples in the step':28}{len(records):>14}{len(verl_batch(second)):>14}")
        for key in ("response_length/mean", "critic/score/mean", "actor/grad_norm", "timing_s/gen"):
            print(f"{key:28}{ro.get(key, float('nan')):>14.4g}{rp.get(key, float('nan')):>14.4g}")
        print(f"{'wall s (start-up incl.)':28}{first_s:>14.0f}{second_s:>14.0f}")
        print(f"verl's batch identical in both runs: {same_batch}")
        check(rp.get("actor/grad_norm", 0.0) > 0.0, "the replay did not update the actor")
        check(same_batch, "verl trained the replay on another batch than the one dumped")
        check(rp["response_length/mean"] == ro["response_length/mean"]
              and rp["critic/score/mean"] == ro["critic/score/mean"], "the replayed lengths or scores differ")
    except CheckFailed as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    print("OK: the replay trained on exactly the dumped step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
