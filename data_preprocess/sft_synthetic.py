"""Write synthetic multi-turn tool conversations for SFT (``messages`` + ``tools`` rows).

Each conversation: a system prompt, a question about the weather in one or two cities, one
``get_weather`` call per city (as a ``<tool_call>`` block, or as structured ``tool_calls`` for every
fourth row), the tool results, and a final answer built from them; every third conversation has a
second user turn asking for a unit conversion (a ``convert`` call, its result, an answer). The shapes
repeat, so a small model's loss on them falls within a few steps: this is the data of the CPU SFT proof
and its slow test, not a data set to learn anything useful from.

    python data_preprocess/sft_synthetic.py --out data/sft_synth [--n 32] [--seed 0]

writes ``<out>/train.parquet`` (messages and tools as JSON strings: parquet would merge the keys of
nested dicts across rows) and ``<out>/train.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

CITIES = ["Paris", "Lima", "Oslo", "Cairo", "Tokyo", "Quito", "Perth", "Dakar", "Seoul", "Bern"]
SKIES = ["sunny", "cloudy", "rainy", "windy", "snowy"]
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "city name"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "convert", "description": "Convert a temperature from Celsius to Fahrenheit.",
        "parameters": {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]}}},
]
SYSTEM = "You are a weather assistant. Use the tools to answer."


def _call_text(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def _assistant_calls(calls: list[tuple[str, dict[str, Any]]], structured: bool) -> dict[str, Any]:
    if structured:
        return {"role": "assistant", "content": "",
                "tool_calls": [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]}
    return {"role": "assistant", "content": "\n".join(_call_text(n, a) for n, a in calls)}


def conversation(index: int, rng: random.Random) -> dict[str, Any]:
    """One synthetic conversation row: ``id``, ``messages``, ``tools``."""
    cities = rng.sample(CITIES, 2 if index % 2 else 1)
    weather = {c: (rng.randint(-5, 35), rng.choice(SKIES)) for c in cities}
    structured = index % 4 == 3
    question = "What is the weather in " + " and ".join(cities) + "?"
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    messages.append(_assistant_calls([("get_weather", {"city": c}) for c in cities], structured))
    for c in cities:
        t, sky = weather[c]
        messages.append({"role": "tool", "content": json.dumps({"city": c, "celsius": t, "sky": sky})})
    messages.append({"role": "assistant", "content": " ".join(
        f"In {c} it is {weather[c][0]} degrees Celsius and {weather[c][1]}." for c in cities)})
    if index % 3 == 0:
        c = cities[0]
        t = weather[c][0]
        messages.append({"role": "user", "content": f"And in Fahrenheit for {c}?"})
        messages.append(_assistant_calls([("convert", {"celsius": t})], structured))
        f = round(t * 9 / 5 + 32, 1)
        messages.append({"role": "tool", "content": json.dumps({"fahrenheit": f})})
        messages.append({"role": "assistant", "content": f"That is {f} degrees Fahrenheit in {c}."})
    return {"id": f"synth-{index}", "messages": messages, "tools": TOOLS}


def build(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` conversations, reproducible from ``seed``."""
    rng = random.Random(seed)
    return [conversation(i, rng) for i in range(n)]


def write(rows: list[dict[str, Any]], out: str | Path, name: str = "train") -> Path:
    """Write ``<out>/<name>.parquet`` (nested data as JSON strings) and ``<out>/<name>.jsonl``."""
    import pandas as pd

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([{"id": r["id"], "messages": json.dumps(r["messages"]), "tools": json.dumps(r["tools"])}
                  for r in rows]).to_parquet(out / f"{name}.parquet", index=False)
    with open(out / f"{name}.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return out / f"{name}.parquet"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--n", type=int, default=32, help="number of conversations")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path = write(build(args.n, args.seed), args.out)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
