"""Chat templates selectable by name from config.

``tokenizer`` means "use the template that ships with the tokenizer" (Qwen3 / Qwen3-Instruct-2507: their
own template already handles tools). Other names are jinja files in this folder:

* ``qwen3``: Qwen3's chat format (tools, grouped tool responses, ``<think>``; earlier reasoning is dropped
  on re-render), for tokenizers that carry no template (the offline Qwen-vocabulary tokenizer of
  :mod:`agent_tune.models.qwen_vocab`).
* ``qwen3_instruct``: the same format as Qwen3-Instruct-2507 writes it (non-thinking: assistant turns are
  rendered as written, so a re-render keeps history).
* ``smollm2_tools``: ChatML as SmolLM2 uses it, with a compact tool listing and Hermes-style
  ``<tool_call>`` blocks (SmolLM2's own template ignores ``tools``).

A name may also be a path to a ``.jinja`` file, for a template kept outside the package.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from agent_tune.errors import ConfigError

TOKENIZER_TEMPLATE = "tokenizer"
_DIR = Path(__file__).resolve().parent


class UnknownTemplateError(ConfigError, KeyError):
    """Raised for a template name that is neither registered nor a readable ``.jinja`` file."""

    def __str__(self) -> str:
        return str(self.args[0])


def available_templates() -> list[str]:
    """The names :func:`load_chat_template` accepts (besides file paths)."""
    return [TOKENIZER_TEMPLATE] + sorted(p.stem for p in _DIR.glob("*.jinja"))


@lru_cache(maxsize=None)
def load_chat_template(name: str) -> str | None:
    """Return the jinja source for ``name``, or ``None`` for ``"tokenizer"`` (keep the tokenizer's own)."""
    if name == TOKENIZER_TEMPLATE:
        return None
    if not name or not isinstance(name, str):
        raise UnknownTemplateError(f"chat template name must be a non-empty string, got {name!r}")
    candidate = _DIR / f"{name}.jinja"
    if "/" not in name and candidate.is_file():
        return _read(candidate)
    path = Path(name).expanduser()
    if name.endswith(".jinja") and path.is_file():
        return _read(path)
    raise UnknownTemplateError(
        f"unknown chat template {name!r}; known: {', '.join(available_templates())} (or a path to a .jinja file)"
    )


def _read(path: Path) -> str:
    # A file ends with a newline; jinja would drop one anyway, strip it so the source is the same either way.
    return path.read_text(encoding="utf-8").rstrip("\n")
