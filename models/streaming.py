"""Stream answer text while keeping tool-call markup out of the text deltas."""

from __future__ import annotations

_MARKERS = ("<tool_call>", "```")


class TextDeltaFilter:
    """Feed raw generated text piece by piece; get back only text that is safe to show.

    Text is held back from the first tool-call marker (`<tool_call>`, a code fence) or when
    the output starts like JSON, because those may turn out to be tool calls. `finish` then
    returns the rest of the final, parsed answer text that was not sent yet.
    """

    def __init__(self) -> None:
        self._raw = ""
        self._sent = 0
        self._held = False

    def feed(self, piece: str) -> str:
        self._raw += piece
        if self._held:
            return ""
        if self._raw.lstrip()[:1] in ("{", "["):
            self._held = True
            return ""
        for marker in _MARKERS:
            index = self._raw.find(marker, self._sent)
            if index >= 0:
                self._held = True
                return self._emit(index)
        return self._emit(len(self._raw) - self._partial_marker_len())

    def finish(self, final_text: str) -> str:
        sent = self._raw[: self._sent].lstrip()
        if final_text.startswith(sent):
            return final_text[len(sent) :]
        return ""

    def _emit(self, end: int) -> str:
        end = max(end, self._sent)
        out = self._raw[self._sent : end]
        if not self._raw[:end].strip():  # leading whitespace is held until real text comes
            return ""
        start_text = self._raw[: self._sent].strip() == ""
        self._sent = end
        return out.lstrip() if start_text else out

    def _partial_marker_len(self) -> int:
        for marker in _MARKERS:
            for k in range(min(len(marker) - 1, len(self._raw)), 0, -1):
                if self._raw.endswith(marker[:k]):
                    return k
        return 0
