"""Text safe for a log line or a status message, whoever wrote it.

Log lines and task status texts quote callers, handlers and databases; a control or format
character in them can rewrite a terminal, forge a log line, or make text read differently from
what it is. Everything the library writes goes through :func:`scrub` (or
:func:`scrub_exception` for a traceback). Imports nothing of the package.
"""

from __future__ import annotations

import re
import traceback

#: C0 controls but tab, DEL and C1 controls; the bidi embeddings, overrides and isolates
#: (U+202A-U+202E, U+2066-U+2069) and marks; the other invisible format characters (soft
#: hyphen, zero-width characters, word joiners, line and paragraph separators, BOM, tags).
#: Each can rewrite a terminal, forge a line, or make text read differently from what it is.
_UNSAFE = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def scrub(text: object) -> str:
    """Text safe for a log line or a status message: control and format characters escaped
    (``\\x1b``, ``\\u202e``), never raw."""
    return _UNSAFE.sub(_escaped, str(text))


def scrub_exception(exc: BaseException) -> str:
    """``exc`` with its traceback, for a log line (``exc_info`` would print its text raw).

    The frames keep their lines (scrubbed); every other line, an exception's own text above
    all (it may quote the caller), is scrubbed onto one line, so it cannot forge a log line.
    """
    lines: list[str] = []
    for chunk in traceback.TracebackException.from_exception(exc).format():
        if chunk.startswith('  File "'):
            lines.extend(scrub(line) for line in chunk.rstrip("\n").split("\n"))
        elif chunk.strip():
            lines.append(scrub(chunk.strip("\n")))
    return "\n".join(lines)
