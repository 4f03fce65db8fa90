"""Measured results as data: ``docs/results/<name>.json``, one record per evaluated model and split, and the
Markdown tables and curves drawn from them.

A results file is a JSON list of records::

    {"env", "stage", "from", "split", "ood", "n", "pass1", "pass1_ci": [lo, hi], "pass4", "pass4_ci": [lo, hi],
     "steps", "command", "category", "train_s"}

``from`` is the stage the model was trained from (null for the base model), ``ood`` is true for a split the model
was not trained on, pass@k values are fractions with their 95% Wilson intervals (as ``agent-tune eval`` reports
them), ``steps`` the training steps behind the model, ``category`` null for all entries or one category's name,
``train_s`` (optional) the training seconds behind the model. ``agent-tune eval record`` adds an eval's report;
``agent-tune eval tables FILE.md`` rewrites each block of FILE.md between::

    <!-- results: NAME [split=S] [ood=true|false] [category=all|each] -->
    <!-- /results -->

with the table of ``NAME.json``'s records (beside FILE.md under ``results/``) that match the filters.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from agent_tune.errors import ConfigError
from agent_tune.eval.metrics import format_interval

REQUIRED = ("env", "stage", "from", "split", "ood", "n", "pass1", "pass1_ci", "pass4", "pass4_ci", "steps", "command")
OPTIONAL = ("category", "train_s")


@dataclass(frozen=True)
class ResultRecord:
    """One evaluated model on one split (or one category of it)."""

    env: str
    stage: str
    from_: str | None
    split: str
    ood: bool
    n: int
    pass1: float
    pass1_ci: tuple[float, float]
    pass4: float | None
    pass4_ci: tuple[float, float] | None
    steps: int
    command: str
    category: str | None = None
    train_s: float | None = None

    @property
    def key(self) -> tuple[str, str, str, str | None]:
        """What a newer record of the same evaluation replaces."""
        return (self.env, self.stage, self.split, self.category)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["from"] = out.pop("from_")
        out = {k: out[k] for k in REQUIRED + OPTIONAL}
        for k in ("pass1", "pass4"):  # 6 decimals: the tables print what the eval printed
            out[k] = None if out[k] is None else round(out[k], 6)
        for k in ("pass1_ci", "pass4_ci"):
            out[k] = None if out[k] is None else [round(x, 6) for x in out[k]]
        if out["train_s"] is not None:
            out["train_s"] = round(out["train_s"], 1)
        return out

    @classmethod
    def from_json(cls, raw: Any, where: str) -> ResultRecord:
        """A record from its JSON object; a missing, unknown or mistyped key is an error naming ``where``."""
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: a record must be a JSON object, got {type(raw).__name__}")
        missing = [k for k in REQUIRED if k not in raw]
        unknown = sorted(set(raw) - set(REQUIRED) - set(OPTIONAL))
        if missing or unknown:
            raise ConfigError(f"{where}: " + "; ".join(
                ([f"missing key {', '.join(map(repr, missing))}"] if missing else [])
                + ([f"unknown key {', '.join(map(repr, unknown))}"] if unknown else [])))
        values = dict(raw)
        values["from_"] = values.pop("from")
        for k in ("pass1_ci", "pass4_ci"):
            ci = values.get(k)
            if ci is not None:
                if not (isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_number(x) for x in ci)):
                    raise ConfigError(f"{where}: {k!r} must be [lo, hi], got {ci!r}")
                values[k] = (float(ci[0]), float(ci[1]))
        record = cls(**{f.name: values.get(f.name) for f in fields(cls)})
        record.check(where)
        return record

    def check(self, where: str) -> None:
        """Types and ranges: every pass@k in [0, 1] and inside its interval."""
        def bad(key: str, value: Any, want: str) -> ConfigError:
            return ConfigError(f"{where}: {key!r} must be {want}, got {value!r}")

        for key in ("env", "stage", "split", "command"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise bad(key, getattr(self, key), "a non-empty string")
        if self.from_ is not None and not isinstance(self.from_, str):
            raise bad("from", self.from_, "a stage name or null")
        if not isinstance(self.ood, bool):
            raise bad("ood", self.ood, "true or false")
        for key in ("n", "steps"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if key == "n" else 0):
                raise bad(key, value, "a positive integer" if key == "n" else "an integer >= 0")
        for key, ci_key in (("pass1", "pass1_ci"), ("pass4", "pass4_ci")):
            value, ci = getattr(self, key), getattr(self, ci_key)
            if value is None and key == "pass4" and ci is None:
                continue
            if not _number(value) or not 0.0 <= value <= 1.0:
                raise bad(key, value, "a fraction in [0, 1]")
            if ci is None or not (0.0 <= ci[0] <= value + 1e-9 and value - 1e-9 <= ci[1] <= 1.0):
                raise bad(ci_key, ci, f"an interval [lo, hi] around {key} {value}")
        if self.category is not None and not isinstance(self.category, str):
            raise bad("category", self.category, "a category name or null")
        if self.train_s is not None and (not _number(self.train_s) or self.train_s < 0):
            raise bad("train_s", self.train_s, "seconds >= 0 or null")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def read_records(path: str | os.PathLike[str]) -> list[ResultRecord]:
    """The records of a results file (an error names the file and the record)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON ({exc})") from None
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: a results file is a JSON list of records")
    return [ResultRecord.from_json(r, f"{path} record {i}") for i, r in enumerate(raw)]


def write_records(path: str | os.PathLike[str], records: Sequence[ResultRecord]) -> Path:
    """Write ``records`` as a results file, one record a line-wrapped JSON object."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = ",\n".join("  " + json.dumps(r.to_json()) for r in records)
    path.write_text("[\n" + body + ("\n" if records else "") + "]\n", encoding="utf-8")
    return path


def upsert(records: Sequence[ResultRecord], new: Iterable[ResultRecord]) -> list[ResultRecord]:
    """``records`` with each of ``new`` replacing the record of the same env, stage, split and category in place,
    or appended."""
    out = list(records)
    for record in new:
        at = next((i for i, r in enumerate(out) if r.key == record.key), None)
        if at is None:
            out.append(record)
        else:
            out[at] = record
    return out


def records_from_report(report: Mapping[str, Any], *, env: str, stage: str, from_: str | None, split: str,
                        ood: bool, steps: int, command: str, categories: bool = False,
                        train_s: float | None = None) -> list[ResultRecord]:
    """The records of one ``agent-tune eval`` report (what ``--report-json`` writes): all entries, and with
    ``categories`` one record per category too. pass@1 is the mean over entries of the share of right samples,
    pass@4 the unbiased estimator; both with the report's own 95% intervals (null when fewer than 4 samples)."""
    def one(group: Mapping[str, Any], category: str | None) -> ResultRecord:
        ci = group.get("ci95") or {}
        p4 = group.get("pass@4")
        return ResultRecord(env=env, stage=stage, from_=from_, split=split, ood=ood, n=int(group["entries"]),
                            pass1=float(group["pass@1"]), pass1_ci=tuple(ci["pass@1"]),
                            pass4=None if p4 is None else float(p4),
                            pass4_ci=None if p4 is None else tuple(ci["pass@4"]),
                            steps=steps, command=command, category=category, train_s=train_s)

    if "overall" not in report:
        raise ConfigError("not an agent-tune eval report (no 'overall'): give the file --report-json wrote")
    out = [one(report["overall"], None)]
    if categories:
        out += [one(group, name) for name, group in sorted((report.get("categories") or {}).items())]
    for r in out:
        r.check(f"the report's {r.category or 'overall'} figures")
    return out


def training_seconds(metrics: str | os.PathLike[str], steps: int) -> float:
    """The training wall time behind step ``steps`` of a run: the sum of ``step_time_s`` over its first ``steps``
    steps in the run's metrics.jsonl (a resumed step counts once, its last record)."""
    from agent_tune.utils.jsonl import read_jsonl

    times: dict[int, float] = {}
    for _, row in read_jsonl(Path(metrics), ConfigError):
        if isinstance(row.get("step"), int) and _number(row.get("step_time_s")):
            times[row["step"]] = float(row["step_time_s"])
    missing = [k for k in range(1, steps + 1) if k not in times]
    if missing:
        raise ConfigError(f"{metrics}: no step_time_s for step(s) {missing[:5]} of the {steps} asked for")
    return sum(times[k] for k in range(1, steps + 1))


def render_table(records: Sequence[ResultRecord]) -> str:
    """A Markdown table of ``records`` in their order: stage, trained from, steps, split (with its category), N,
    pass@1 and pass@4 in percent with their 95% intervals."""
    head = ["stage", "from", "steps", "split", "N", "pass@1 [95% CI]", "pass@4 [95% CI]"]
    rows = []
    for r in records:
        split = r.split + (f" / {r.category}" if r.category else "") + (" (OOD)" if r.ood else "")
        rows.append([r.stage, r.from_ or "-", str(r.steps), split, str(r.n), format_interval(r.pass1, r.pass1_ci),
                     "-" if r.pass4 is None else format_interval(r.pass4, r.pass4_ci)])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


BLOCK = re.compile(r"(<!-- results: (?P<spec>[^>]*?) -->\n)(?P<body>.*?)(<!-- /results -->)", re.S)
FILTERS = ("split", "ood", "category")


def _select(records: Sequence[ResultRecord], options: Mapping[str, str], where: str) -> list[ResultRecord]:
    unknown = sorted(set(options) - set(FILTERS))
    if unknown:
        raise ConfigError(f"{where}: unknown filter {', '.join(map(repr, unknown))} (known: {', '.join(FILTERS)})")
    out = list(records)
    if "split" in options:
        out = [r for r in out if r.split == options["split"]]
    if "ood" in options:
        if options["ood"] not in ("true", "false"):
            raise ConfigError(f"{where}: ood must be true or false, got {options['ood']!r}")
        out = [r for r in out if r.ood == (options["ood"] == "true")]
    category = options.get("category", "all")
    if category not in ("all", "each"):
        raise ConfigError(f"{where}: category must be all or each, got {category!r}")
    return [r for r in out if (r.category is None) == (category == "all")]


def update_tables(markdown: str | os.PathLike[str], results_dir: str | os.PathLike[str] | None = None,
                  check: bool = False) -> list[str]:
    """Rewrite each results block of ``markdown`` from its JSON file (``results_dir``, default ``results/`` beside
    the Markdown file); with ``check`` change nothing. Returns the names of the blocks whose table was stale."""
    path = Path(markdown)
    folder = Path(results_dir) if results_dir else path.parent / "results"
    text = path.read_text(encoding="utf-8")
    stale: list[str] = []

    def fill(match: re.Match[str]) -> str:
        try:  # a value with spaces is quoted: split="trained entries"
            name, *opts = shlex.split(match.group("spec"))
        except ValueError as exc:
            raise ConfigError(f"{path}: block 'results: {match.group('spec')}': {exc}") from exc
        where = f"{path}: block 'results: {match.group('spec')}'"
        options = dict(o.split("=", 1) if "=" in o else (o, "") for o in opts)
        records = _select(read_records(folder / f"{name}.json"), options, where)
        if not records:
            raise ConfigError(f"{where}: no record of {folder / (name + '.json')} matches")
        table = render_table(records)
        if match.group("body") != table:
            stale.append(match.group("spec"))
        return match.group(1) + table + match.group(4)

    new = BLOCK.sub(fill, text)
    if not check and new != text:
        path.write_text(new, encoding="utf-8")
    return stale


def plot_curve(records: Sequence[ResultRecord], out: str | os.PathLike[str], title: str | None = None) -> Path:
    """Test pass@1 (with its 95% interval) against training steps and, when the records carry ``train_s``, against
    training wall time; one line per (env, split) among ``records`` with ``category`` null."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines: dict[tuple[str, str], list[ResultRecord]] = {}
    for r in records:
        if r.category is None:
            lines.setdefault((r.env, r.split + (" (OOD)" if r.ood else "")), []).append(r)
    timed = any(r.train_s is not None for r in records)
    fig, axes = plt.subplots(1, 2 if timed else 1, figsize=(11 if timed else 6, 4), squeeze=False)
    for (env, split), rs in lines.items():
        rs = sorted(rs, key=lambda r: r.steps)
        for ax, xs in zip(axes[0], ([r.steps for r in rs], [(r.train_s or 0.0) / 60 for r in rs])):
            ys = [100 * r.pass1 for r in rs]
            ax.plot(xs, ys, marker="o", label=f"{env} {split}")
            ax.fill_between(xs, [100 * r.pass1_ci[0] for r in rs], [100 * r.pass1_ci[1] for r in rs], alpha=0.2)
    axes[0][0].set_xlabel("GRPO steps")
    if timed:
        axes[0][1].set_xlabel("training wall time (min)")
    for ax in axes[0]:
        ax.set_ylabel("test pass@1 (%), 95% interval")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
