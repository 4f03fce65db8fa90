"""Sandbox cost: executions/s and per-run overhead of the code sandbox vs a plain subprocess.

Runs the same fixed snippets (a) one at a time and (b) through a pool of ``--concurrency`` workers,
once with ``python -I -S -c SNIPPET`` in a plain subprocess (same interpreter and flags as the local
sandbox, no isolation) and once in the configured sandbox, and prints both with their ratio. The two are
measured in alternating rounds (median over rounds) so that load from other jobs hits both alike.

Then the start-up cost of the scientific stack the sandbox ships (numpy, sympy, scipy): programs that
import one of them (or all three) and compute one small thing, run one at a time next to a plain program,
in the sandbox and in a plain subprocess given the same site-packages, in the same alternating rounds;
each is reported in ms/run and as a ratio to the plain program under the same runner.

    python benchmarks/sandbox.py [--runs 100] [--import-runs 10] [--concurrency 4] [--backend local]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from agent_tune.tools import ExecutionLimits, SandboxConfig, make_sandbox

SNIPPETS = [
    "print(sum(i * i for i in range(10000)))",
    "import math\nprint(math.factorial(50) % 1000003)",
    "from fractions import Fraction\nprint(sum(Fraction(1, k) for k in range(1, 40)))",
    "import itertools\nprint(sum(1 for p in itertools.permutations(range(7)) if p[0] < p[-1]))",
]

# (label, program): a plain program first (the reference), then the scientific stack's imports
IMPORT_SNIPPETS = [
    ("plain program", "print(sum(i * i for i in range(10000)))"),
    ("numpy", "import numpy as np\nprint(int(np.arange(10000).dot(np.arange(10000))))"),
    ("sympy", "import sympy\nx = sympy.symbols('x')\nprint(sympy.solve(x**2 - 5*x + 6, x))"),
    ("scipy.optimize", "from scipy import optimize\nprint(round(optimize.brentq(lambda t: t**3 - 2, 0, 2), 9))"),
    ("numpy+sympy+scipy", "import numpy, sympy, scipy, scipy.optimize, scipy.integrate, scipy.linalg\nprint('ok')"),
]


def plain_runner(site_packages: str | None = None) -> Callable[[str], str]:
    """``python -I -S -c CODE`` without isolation; ``site_packages`` appended to ``sys.path`` first if given."""
    exe = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    prefix = f"import sys\nsys.path.append({site_packages!r})\n" if site_packages else ""

    def run(code: str) -> str:
        return subprocess.run(
            [exe, "-I", "-S", "-u", "-B", "-c", prefix + code], capture_output=True, text=True, timeout=60
        ).stdout

    return run


def repeat_latency(run: Callable[[str], str], code: str, n: int) -> tuple[float, str]:
    """Median seconds per run of one program run ``n`` times one at a time, and its (last) output."""
    latencies, out = [], ""
    for _ in range(n):
        t0 = time.perf_counter()
        out = run(code)
        latencies.append(time.perf_counter() - t0)
    return statistics.median(latencies), out


def serial_latency(run: Callable[[str], str], n: int) -> float:
    """Median seconds per run, one run at a time."""
    latencies = []
    for i in range(n):
        t0 = time.perf_counter()
        run(SNIPPETS[i % len(SNIPPETS)])
        latencies.append(time.perf_counter() - t0)
    return statistics.median(latencies)


def pool_rate(run: Callable[[str], str], runs: int, concurrency: int) -> tuple[float, list[str]]:
    """Executions/s with ``concurrency`` runs in flight, and the outputs in order."""
    codes = [SNIPPETS[i % len(SNIPPETS)] for i in range(runs)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        outputs = list(pool.map(run, codes))
    return runs / (time.perf_counter() - t0), outputs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100, help="programs per throughput round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--import-runs", type=int, default=10, help="runs of each import program per round (0: skip)")
    ap.add_argument("--concurrency", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--backend", default="local", choices=["local", "sandbox_fusion"])
    ap.add_argument("--url", default="http://localhost:8080", help="SandboxFusion url (sandbox_fusion backend)")
    args = ap.parse_args(argv)

    cfg = SandboxConfig.parse(
        {
            "backend": args.backend,
            "max_concurrency": args.concurrency,
            "limits": ExecutionLimits(wall_seconds=60),
            "sandbox_fusion": {"url": args.url},
        },
        "sandbox",
    )
    t0 = time.perf_counter()
    box = make_sandbox(cfg)
    startup = time.perf_counter() - t0
    plain, sandboxed = plain_runner(), (lambda c: box.run(c).stdout)
    numpy_spec = importlib.util.find_spec("numpy")
    site_packages = os.path.dirname(os.path.dirname(numpy_spec.origin)) if numpy_spec and numpy_spec.origin else None
    plain_site = plain_runner(site_packages)
    lat: dict[str, list[float]] = {"plain": [], "box": []}
    rate: dict[str, list[float]] = {"plain": [], "box": []}
    imports: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(args.rounds):
            for name, run in (("plain", plain), ("box", sandboxed)):
                lat[name].append(serial_latency(run, max(8, args.runs // 5)))
                r, out = pool_rate(run, args.runs, args.concurrency)
                rate[name].append(r)
                if name == "plain":
                    expected = out
                elif out != expected:
                    print("ERROR: the sandbox's outputs differ from the plain subprocess's", file=sys.stderr)
                    return 1
            for label, code in IMPORT_SNIPPETS if args.import_runs > 0 and site_packages else ():
                outs = {}
                for name, run in (("plain", plain_site), ("box", sandboxed)):
                    seconds, outs[name] = repeat_latency(run, code, args.import_runs)
                    imports.setdefault((label, name), []).append(seconds)
                if not outs["box"] or outs["box"] != outs["plain"]:
                    print(f"ERROR: {label!r}: the sandbox printed {outs['box']!r}, the plain subprocess "
                          f"{outs['plain']!r}", file=sys.stderr)
                    return 1
    finally:
        box.close()
    plain_lat, box_lat = statistics.median(lat["plain"]), statistics.median(lat["box"])
    plain_rate, box_rate = statistics.median(rate["plain"]), statistics.median(rate["box"])
    method = getattr(box, "process_limit_method", "-")
    print(f"backend={args.backend} process_limit={method} runs={args.runs} concurrency={args.concurrency} "
          f"rounds={args.rounds} cpus={os.cpu_count()} load1={os.getloadavg()[0]:.1f} "
          f"startup_check={startup * 1000:.0f} ms")
    print(f"{'':18}{'exec/s (pool)':>15}{'ms/run (serial)':>18}")
    print(f"{'plain subprocess':18}{plain_rate:15.1f}{plain_lat * 1000:18.1f}")
    print(f"{'sandbox':18}{box_rate:15.1f}{box_lat * 1000:18.1f}")
    print(f"per-run overhead: {(box_lat - plain_lat) * 1000:.1f} ms; "
          f"latency ratio sandbox/plain: {box_lat / plain_lat:.2f}x; "
          f"throughput ratio plain/sandbox: {plain_rate / box_rate:.2f}x")
    if imports:
        med = {key: statistics.median(v) for key, v in imports.items()}
        ref = IMPORT_SNIPPETS[0][0]
        packages = ", ".join(getattr(getattr(box, "packages", None), "distributions", ())) or "the server's"
        print(f"start-up with the scientific stack ({packages}), ms/run serial, median of {args.rounds} rounds "
              f"x {args.import_runs} runs; ratio: vs the plain program under the same runner")
        print(f"{'program':20}{'plain subprocess':>18}{'ratio':>8}{'sandbox':>10}{'ratio':>8}")
        for label, _ in IMPORT_SNIPPETS:
            p_ms, b_ms = med[(label, "plain")] * 1000, med[(label, "box")] * 1000
            p_ratio, b_ratio = med[(label, "plain")] / med[(ref, "plain")], med[(label, "box")] / med[(ref, "box")]
            print(f"{label:20}{p_ms:18.1f}{p_ratio:7.2f}x{b_ms:10.1f}{b_ratio:7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
