"""``agent-tune view PATH [--out FILE] [--serve [--port N]]``: a run, an eval or a dump as one HTML page.

    agent-tune view outputs/run/checkpoints                 # a training run: curves, episodes, groups, tokens
    agent-tune view outputs/curriculum_run                  # a curriculum: its stages on one step axis
    agent-tune view smol_test.jsonl                         # an eval output: report, pass@k, episodes
    agent-tune view runs/ro/rollout_dump                    # a rollout-only dump
    agent-tune view outputs/run/checkpoints --serve         # on http://127.0.0.1:8765/, following the run

The page is one file with everything inlined (it opens from disk, nothing is fetched); ``--out`` says where
(default: ``<run folder>/view.html``, ``<X>.view.html`` beside an eval output or a record file). ``--serve`` serves
it on 127.0.0.1 instead, and the page polls for new steps and episodes while the run trains. What each view shows
and the record format: ``docs/viewer.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Sequence

from agent_tune.rollout.records import RecordFileError
from agent_tune.view.page import View, render_page
from agent_tune.view.sources import ViewSourceError, open_source

DEFAULT_PORT = 8765


def default_out(path: Path) -> Path:
    """Where the page goes without ``--out``: in a folder, ``view.html``; beside a file, ``<stem>.view.html``."""
    path = path.expanduser()
    if path.is_dir():
        return path / "view.html"
    name = path.name.removesuffix(".gz").removesuffix(".jsonl")
    return path.with_name(f"{name}.view.html")


def write_page(path: str | Path, out: str | Path | None = None) -> tuple[Path, View]:
    """Build the page of ``path`` and write it to ``out`` (default :func:`default_out`); (the file, the view)."""
    view = View(open_source(path))
    target = Path(out) if out is not None else default_out(Path(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_page(view), encoding="utf-8")
    return target, view


def serve(path: str | Path, port: int) -> int:
    """Serve the page of ``path`` on 127.0.0.1:``port`` until interrupted."""
    from agent_tune.view.serve import ViewServer

    server = ViewServer(View(open_source(path)), port)
    print(f"agent-tune view: {len(server.view.table)} episodes of {path} on {server.url} (Ctrl-C stops)", flush=True)
    if not len(server.view.table):
        print(f"agent-tune view: {server.view.source.none_found()}", file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agent-tune view``; returns the exit code (1: the path cannot be shown, or is not episode
    records; a run without episodes is written, with a line naming where they were looked for)."""
    ap = argparse.ArgumentParser(prog="agent-tune view", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", type=Path, help="a training run folder, a curriculum run folder, an eval output "
                    "(.jsonl), a rollout dump folder, or a folder or file of episode records")
    ap.add_argument("--out", type=Path, default=None, help="the HTML file to write (default: see above)")
    ap.add_argument("--serve", action="store_true", help="serve the page on 127.0.0.1 and follow the run")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"--serve's port (default {DEFAULT_PORT}; 0: any)")
    args = ap.parse_args(argv)
    try:
        if args.serve:
            return serve(args.path, args.port)
        started = time.perf_counter()
        out, view = write_page(args.path, args.out)
    except (ViewSourceError, RecordFileError) as exc:
        print(f"agent-tune view: {exc}", file=sys.stderr)
        return 1
    size = out.stat().st_size / 1e6
    print(f"wrote {out} ({len(view.table)} episodes, {size:.1f} MB, {time.perf_counter() - started:.1f} s)")
    if not len(view.table):  # a run that should have some: say where they were looked for
        print(f"agent-tune view: {view.source.none_found()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
