"""One model response -> (reasoning, tool calls): the reasoning parser, then the tool-call parser."""

from __future__ import annotations

from agent_tune.parsing.reasoning import NoReasoningParser
from agent_tune.parsing.registry import get_reasoning_parser, get_tool_parser
from agent_tune.parsing.types import ParsedResponse


class ResponseParser:
    """Strips reasoning with the named reasoning parser, then decodes calls with the named tool-call parser.

    Environments call it from several contract methods for one response (``stop``, then
    ``extract_tool_calls`` inside ``step``): the last response's result is kept, so it is parsed once.
    """

    def __init__(self, tool_parser: str = "hermes", reasoning_parser: str = "none") -> None:
        self.tool_parser = get_tool_parser(tool_parser)
        self.reasoning_parser = get_reasoning_parser(reasoning_parser)
        self._last_raw: str | None = None
        self._last: tuple[str | None, ParsedResponse] | None = None  # the result for _last_raw, returned as is

    def parse(self, raw_response: str) -> tuple[str | None, ParsedResponse]:
        """``(reasoning or None, the calls, errors and content outside them)``; never raises on model text."""
        last = self._last
        if last is not None and (raw_response is self._last_raw or raw_response == self._last_raw):
            return last
        if type(self.reasoning_parser) is NoReasoningParser:  # leaves the text as is: not called (one per generation)
            last = (None, self.tool_parser.parse(raw_response))
        else:
            reasoning, content = self.reasoning_parser.parse(raw_response)
            last = (reasoning, self.tool_parser.parse(content))
        self._last, self._last_raw = last, raw_response
        return last
