"""The BFCL env's speed-up over bfcl-eval (``benchmarks/bfcl_env.py``) in this tree and in another commit, alternated
in one run on one machine: whether a change made the env faster, whatever the machine.

``bfcl_env.py``'s ratio is a property of the machine as much as of the code: the same commit measures 5.5x on one box
and 4.8x on another (the interpreter's build, the CPU's caches and branch predictors weigh differently on the two
paths), so a ratio taken on one box and a target set on another do not compare. This script checks a commit out (``git
archive``, into a temporary folder), then runs its ``benchmarks/bfcl_env.py`` and this tree's in turn, each in a
process of its own importing its own ``agent_tune``, ``--rounds`` times, and prints per category the median speed-up
of each and their quotient (this tree / the commit: above 1, this tree's env is faster). Each run's speed-up is already
relative to bfcl-eval timed in the same process, so a change of load between runs cancels out; a round's two runs
are paired, and the median of the rounds' quotients comes with a distribution-free 95% interval (6 rounds or more).
``--json`` writes the runs, the medians, the quotients and the machine (CPU, Python and its build flags, bfcl-eval,
load): docs/results/bfcl_env_speed.json is one.

    python benchmarks/bfcl_env_vs_commit.py 53daeff [--rounds 3] [--repeats 20] [--json out.json]

On a machine without the repository's history (a copy of the working tree), give a folder holding the commit's tree
instead (``git archive f62590e | tar -x -C trees/f62590e`` where git is), named after the commit, and this tree's
commit with ``--this-commit``.

The commit's benchmark must print ``bfcl_env.py``'s table (``<category> <bfcl-eval/s> <agent-tune/s> <ratio>x``);
every commit since the env's first benchmark does.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARK = "benchmarks/bfcl_env.py"
_ROW = re.compile(r"^(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x$")
RUN_TIMEOUT_S = 900  # one bfcl_env.py run: ~5 s at --repeats 20 on 2 shared cores


def resolve(rev: str) -> str:
    """The full hash of commit ``rev``; a ``SystemExit`` naming it when git does not know it."""
    proc = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise SystemExit(f"bfcl_env_vs_commit: {rev!r} is not a commit of {REPO}")
    return proc.stdout.strip()


def check_out(commit: str, into: Path) -> Path:
    """The tree of ``commit`` written into ``into`` (no git state changed); a ``SystemExit`` when it has no
    ``benchmarks/bfcl_env.py``."""
    into.mkdir(parents=True, exist_ok=True)
    archive = into / "tree.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", "--format=tar", commit], cwd=REPO, stdout=out, check=True, timeout=300)
    tree = into / commit[:12]
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4 (the archive is this repository's own)
            tar.extractall(tree, filter="data")
        else:
            tar.extractall(tree)
    archive.unlink()
    if not (tree / BENCHMARK).exists():
        raise SystemExit(f"bfcl_env_vs_commit: commit {commit[:12]} has no {BENCHMARK}")
    return tree


def speed_ups(text: str) -> dict[str, float]:
    """Category -> speed-up, from ``bfcl_env.py``'s table (its ``all`` row included)."""
    rows = {m.group(1): float(m.group(4)) for line in text.splitlines() if (m := _ROW.match(line.strip()))}
    if "all" not in rows:
        raise ValueError(f"no '{BENCHMARK}' table in this output:\n{text}")
    return rows


def run(tree: Path, repeats: int, per_category: int) -> dict[str, float]:
    """One ``bfcl_env.py`` run of ``tree`` (its own ``agent_tune`` first on the path): its speed-ups."""
    cmd = [sys.executable, BENCHMARK, "--repeats", str(repeats), "--per-category", str(per_category)]
    try:
        proc = subprocess.run(cmd, cwd=tree, env=_env(tree), capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"bfcl_env_vs_commit: {BENCHMARK} in {tree} took over {RUN_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise SystemExit(f"bfcl_env_vs_commit: {BENCHMARK} failed in {tree} (rc {proc.returncode}):\n"
                         f"{proc.stderr[-3000:]}")
    return speed_ups(proc.stdout)


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free interval for the median of the population ``values`` were drawn from: the order
    statistics ``(x_(k), x_(n+1-k))`` with the largest ``k`` whose coverage (binomial, p = 1/2) is at least ``level``;
    None for fewer than 6 values (no such pair reaches 95%)."""
    xs, n = sorted(values), len(values)
    best = None
    for k in range(1, n // 2 + 1):
        # P(x_(k) <= median <= x_(n+1-k)) = 1 - 2 * P(Binomial(n, 1/2) <= k - 1)
        tail = sum(math.comb(n, i) for i in range(k)) / 2 ** n
        if 1 - 2 * tail < level:
            break
        best = (xs[k - 1], xs[n - k])
    return best


def machine() -> dict[str, object]:
    """What the ratio depends on besides the code: the CPU, the interpreter and its build, bfcl-eval, the load."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        bfcl = importlib.metadata.version("bfcl-eval")
    except importlib.metadata.PackageNotFoundError:
        bfcl = None
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "python": sys.version.split()[0],
            "python_build": " ".join(platform.python_build()), "python_cflags": sysconfig.get_config_var("CFLAGS"),
            "bfcl_eval": bfcl, "load_average_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}


MEASURED = ("agent_tune", "benchmarks")  # what a bfcl_env.py run imports from the tree


def this_commit() -> str:
    """This tree's commit, ``+dirty`` when what the benchmark runs (``MEASURED``) has uncommitted changes (of tracked
    files; a change to the docs is not one)."""
    head = resolve("HEAD")
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", *MEASURED], cwd=REPO, timeout=60).returncode != 0
    return head + ("+dirty" if dirty else "")


def _env(tree: Path) -> dict[str, str]:
    # that tree's agent_tune ahead of the editable install, the path given to this process kept after it
    path = os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def other_tree(commit_or_folder: str, tmp: Path) -> tuple[str, Path]:
    """The tree to compare with and its name: a folder holding an extracted tree (named after its commit), or the
    commit's tree checked out into ``tmp``."""
    folder = Path(commit_or_folder)
    if folder.is_dir():
        if not (folder / BENCHMARK).is_file():
            raise SystemExit(f"bfcl_env_vs_commit: the folder {folder} has no {BENCHMARK}")
        return folder.resolve().name, folder.resolve()
    commit = resolve(commit_or_folder)
    return commit, check_out(commit, tmp)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("commit", help="the commit to compare with (any git revision: 53daeff, main~3, a tag), or a "
                    "folder holding its tree, named after it")
    ap.add_argument("--this-commit", help="this tree's commit, for a copy that is not a git checkout (default: git's)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each tree, alternated (default 3)")
    ap.add_argument("--repeats", type=int, default=20, help="bfcl_env.py's --repeats (default 20)")
    ap.add_argument("--per-category", type=int, default=50, help="bfcl_env.py's --per-category (default 50)")
    ap.add_argument("--json", type=Path, help="also write the runs and medians here")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    where, this = machine(), args.this_commit or this_commit()  # as the runs start
    with tempfile.TemporaryDirectory(prefix="bfcl_env_vs_") as tmp:
        commit, tree = other_tree(args.commit, Path(tmp))
        trees = {"this tree": REPO, commit[:12]: tree}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        t0 = time.monotonic()
        for i in range(args.rounds):
            # this tree first in odd rounds, the commit first in even ones: neither always runs after the other
            order = list(trees) if i % 2 == 0 else list(reversed(trees))
            for name in order:
                runs[name].append(run(trees[name], args.repeats, args.per_category))
            done = i + 1
            eta = (time.monotonic() - t0) / done * (args.rounds - done)
            print(f"round {done}/{args.rounds}: " + ", ".join(f"{n} all {runs[n][-1]['all']:.2f}x" for n in trees)
                  + f" (ETA {eta:.0f} s)", flush=True)
    ours, theirs = list(trees)
    medians = {name: {cat: statistics.median(r[cat] for r in rs) for cat in rs[0]} for name, rs in runs.items()}
    # a round's quotient pairs the two runs made back to back (the same load), its median comes with an interval
    quotients = {cat: [a[cat] / b[cat] for a, b in zip(runs[ours], runs[theirs]) if b.get(cat)]
                 for cat in medians[ours]}
    intervals = {cat: median_interval(q) for cat, q in quotients.items()}
    print(f"\nspeed-up over bfcl-eval, median of {args.rounds} runs each ({BENCHMARK} --repeats {args.repeats})")
    print(f"{'category':<26}{ours:>12}{theirs:>14}{'quotient':>10}  95% interval (paired by round)")
    for cat in medians[ours]:
        a, b = medians[ours][cat], medians[theirs].get(cat)
        quotient = f"{statistics.median(quotients[cat]):>9.3f}" if quotients[cat] else f"{'-':>9}"
        ci = intervals[cat]
        print(f"{cat:<26}{a:>11.2f}x{(f'{b:.2f}x' if b else '-'):>14}{quotient}  "
              + (f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "- (6 rounds or more)"))
    print(f"(quotient > 1: this tree's env is faster than {theirs}'s, on this machine: {where['cpu']}, "
          f"Python {where['python']})")
    if args.json:
        record = {"command": "python benchmarks/bfcl_env_vs_commit.py " + " ".join(sys.argv[1:]),
                  "date": time.strftime("%Y-%m-%d"), "commit": commit,
                  "this_tree": this, "machine": where,
                  "target": {"all": 6.0, "every_category": 5.0}, "rounds": args.rounds,
                  "repeats": args.repeats, "per_category": args.per_category,
                  "runs": {"this_tree" if n == ours else commit: rs for n, rs in runs.items()},
                  "medians": {"this_tree" if n == ours else commit: m for n, m in medians.items()},
                  "quotients": {cat: {"median": statistics.median(q) if q else None, "interval_95": intervals[cat],
                                      "per_round": q} for cat, q in quotients.items()}}
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
