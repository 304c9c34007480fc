"""The words of an answer that is not JSON: a host app's or a proxy's error page.

Something in front of the exchange (the host's CSRF check, its login hook, its ban page, a
proxy) may answer with HTML. What a person would read first is what a caller needs to hear:
the page's first heading and the paragraph after it, else its title, else its first text.
Imports nothing of the package but :mod:`.scrub`.
"""

from __future__ import annotations

import html.parser
import json
import typing as t

from .scrub import scrub

#: The most of a page that is read for its words.
MAX_PAGE_BYTES: t.Final = 64 * 1024
#: The most words quoted.
MAX_TEXT: t.Final = 300
#: Elements whose text is never a page's message: code, and the site's own frame around it.
_SKIPPED: t.Final = frozenset(
    {"script", "style", "template", "noscript", "head", "svg", "nav", "header", "footer"}
)
#: Elements that have no end tag.
_VOID: t.Final = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
     "track", "wbr"}
)  # fmt: skip


class _Reader(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.heading: list[list[str]] = []
        self.after_heading: list[str] = []
        self.first: list[str] = []
        self._open: list[str] = []
        #: How deep the paragraph after the heading is open (0: it ended).
        self._paragraph: int | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("h1", "h2") and self._paragraph is None and not self._in_heading():
            self.heading.append([])  # each heading its own phrase: "Forbidden: You are banned"
        if tag not in _VOID:
            self._open.append(tag)

    def _in_heading(self) -> bool:
        return any(tag in ("h1", "h2") for tag in self._open)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            del self._open[len(self._open) - 1 - self._open[::-1].index(tag) :]
        if self._paragraph is not None and len(self._open) < self._paragraph:
            self._paragraph = 0  # the paragraph after the heading ended: it is whole

    def handle_data(self, data: str) -> None:
        text = " ".join(data.split())
        if not text:
            return
        if "title" in self._open:
            self.title.append(text)
        elif any(tag in _SKIPPED for tag in self._open):
            return
        elif self._in_heading():
            if self._paragraph is None and self.heading:
                self.heading[-1].append(data)
        elif self.heading and self._paragraph is None:
            self._paragraph = len(self._open)
            self.after_heading.append(data)
        elif self._paragraph:
            self.after_heading.append(data)
        elif not self.first:
            self.first.append(text)


def page_text(body: bytes, mimetype: str) -> str:
    """The first words of a non-JSON answer, scrubbed and short; ``""`` when it has none.

    HTML: its first ``<h1>``/``<h2>`` and the paragraph after it (``Forbidden: You don't
    have the permission…``), else its ``<title>``, else its first text. Plain text: its first
    line. Anything else: nothing (its bytes say nothing a person could read)."""
    text = body[:MAX_PAGE_BYTES].decode("utf-8", "replace")
    if mimetype in ("text/html", "application/xhtml+xml") or (
        not mimetype and text.lstrip()[:1] == "<"
    ):
        reader = _Reader()
        try:
            reader.feed(text)
            reader.close()
        except Exception:  # html.parser raises on little; a page it cannot read says nothing
            return ""
        if reader.heading:
            words = ": ".join(" ".join("".join(h).split()) for h in reader.heading if h)
            if reader.after_heading:
                words = f"{words}: {''.join(reader.after_heading)}"
        else:
            words = " ".join(reader.title) or " ".join(reader.first)
    elif mimetype.startswith("text/") or not mimetype:
        words = next((line.strip() for line in text.splitlines() if line.strip()), "")
    else:
        return ""
    return _short(words)


def answer_text(body: bytes, mimetype: str) -> str:
    """The words of any error answer: a JSON one compacted (its ``message`` or ``error``
    when it has one), else :func:`page_text`."""
    if mimetype == "application/json" or mimetype.endswith("+json"):
        try:
            data = json.loads(body[:MAX_PAGE_BYTES])
        except (ValueError, UnicodeDecodeError):
            return ""
        if isinstance(data, dict):
            said = data.get("message") or data.get("error")
            if isinstance(said, str):
                data = said
        words = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        return _short(words)
    return page_text(body, mimetype)


def _short(words: str) -> str:
    words = " ".join(words.split())
    if len(words) > MAX_TEXT:
        words = words[: MAX_TEXT - 1] + "…"
    return scrub(words)
