"""Protected spans: placeholders (`%s`, `%(name)s`, `%1$d`, `{count}`), template syntax (`{{< ref
"x" >}}`, `{{ name }}`, `{% if x %}`), URLs, e-mail addresses and what a user's pattern matches are
never translated. Each is swapped for a placeholder the
model copies, the placeholder is asked of the search as a term it must write (beam search can
force it), and the span goes back where the placeholder came out. A placeholder the model dropped
goes in where its source position says; one it wrote twice is kept once, so every protected span
of the input is in the output exactly once (benchmarks/protect.py measures how often that repair
is needed for each way of carrying them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mt_cli.errors import MtError

# printf conversions (no space flag: "20% discount" is not "% d"; none right after a digit:
# German "100%ig" is not "%i"), positional ones (%1$s) and Python's named ones (%(name)s);
# brace placeholders ({count}, {0}, {}, {{name}}).
PRINTF = r"(?<![0-9])%(?:\([A-Za-z_]\w*\)|\d+\$)?[-+#0]*(?:\d+|\*)?(?:\.\d+)?[sdifuxXoeEgGc]"
BRACE = r"\{\{?[A-Za-z0-9_.:\[\]]*\}\}?"
URL = r"\b(?:https?|ftp)://[^\s<>\"']*[^\s<>\"'.,;:!?)\]]|\bwww\.[^\s<>\"']*[^\s<>\"'.,;:!?)\]]"
EMAIL = r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}\b"
# Template syntax of static-site generators and template engines: Hugo's shortcodes ({{< ref "x"
# >}}, {{% note %}}), Jinja's and Liquid's {{ name }} and {% if x %}; one line each.
TEMPLATE = r"\{\{[<%].*?[>%]\}\}|\{%.*?%\}|\{\{.*?\}\}"
# A template a document's parser must not see (masked_templates), as a token of private-use
# characters.
TOKEN = "\ue010{}\ue011"
_TOKENS = r"\ue010\d+\ue011"
# In this order: a template's URL stays inside the template, and a URL's "%20" inside the URL.
BUILT_IN = (_TOKENS, TEMPLATE, URL, EMAIL, PRINTF, BRACE)


def masked_templates(text: str) -> tuple[str, list[str]]:
    """The document with each template span swapped for a token, before its parser reads it: a
    Markdown link to {{< ref "post.md" >}} stays a link, and HTML's parser never sees its "<".
    The tokens are protected spans (BUILT_IN); `unmasked_templates` puts the templates back."""
    found: list[str] = []

    def token(m: re.Match[str]) -> str:
        found.append(m.group())
        return TOKEN.format(len(found) - 1)

    return re.sub(TEMPLATE, token, text), found


def unmasked_templates(text: str, found: list[str]) -> str:
    return re.sub(_TOKENS, lambda m: found[int(m.group()[1:-1])], text) if found else text


# How a span is carried through the model: "number" swaps it for a number the model copies as it
# is, "code" for a letter code, "verbatim" leaves it in the sentence (benchmarks/protect.py compares
# how often each comes through).
STYLES = ("number", "code", "verbatim")


def placeholders(style: str, spans: list[str], text: str) -> list[str]:
    """A placeholder per span, none of them found in the sentence otherwise."""
    if style == "verbatim":
        return spans
    base = 7001
    while True:
        markers = [
            str(base + k) if style == "number" else f"XZ{chr(65 + k % 26)}{k // 26 or ''}"
            for k in range(len(spans))
        ]
        if not any(m in text for m in markers):
            return markers
        base += 1000


def compile_pattern(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise MtError(
            f"document.protect_pattern {pattern!r} is not a regular expression: {e}"
        ) from None


@dataclass(frozen=True)
class Masked:
    text: str  # the sentence with each span swapped for its placeholder
    spans: tuple[str, ...]  # the spans, in order
    markers: tuple[str, ...]  # their placeholders
    where: tuple[float, ...]  # each placeholder's place in `text`, as a share of its length


class Protector:
    """Masks a sentence's protected spans and restores them in its translation."""

    def __init__(self, pattern: str = "", style: str = "number") -> None:
        self.style = style
        parts = [*BUILT_IN, *([compile_pattern(pattern).pattern] if pattern else [])]
        self.regex = re.compile("|".join(f"(?:{p})" for p in parts))

    def mask(self, sentence: str) -> Masked:
        found = [m for m in self.regex.finditer(sentence) if m.group()]
        spans = [m.group() for m in found]
        markers = placeholders(self.style, spans, sentence)
        out, where, end = [], [], 0
        for m, marker in zip(found, markers):
            out.append(sentence[end : m.start()])
            where.append(len("".join(out)))
            out.append(marker)
            end = m.end()
        out.append(sentence[end:])
        text = "".join(out)
        return Masked(
            text, tuple(spans), tuple(markers), tuple(w / max(len(text), 1) for w in where)
        )

    def restore(self, translation: str, masked: Masked) -> str:
        """The translation with each placeholder replaced by its span, exactly once each."""
        text = translation
        for marker, share in zip(masked.markers, masked.where):
            found = [m.start() for m in marker_regex(marker).finditer(text)]
            if len(found) > 1:  # keep the first; the rest were the model repeating itself
                head = text[: found[0] + len(marker)]
                text = head + re.sub(r"\s*" + marker_regex(marker).pattern, "", text[len(head) :])
            elif not found:
                text = _insert(text, marker, share)
        if self.style == "verbatim":
            return text
        # Each marker is now in the text once; put the spans in for them (in one pass, so a span
        # that looks like a later marker is not replaced again).
        spans = dict(zip(masked.markers, masked.spans))
        return (
            re.sub(
                "|".join(marker_regex(m).pattern for m in masked.markers),
                lambda m: spans[m.group()],
                text,
            )
            if spans
            else text
        )


def marker_regex(marker: str) -> re.Pattern[str]:
    """The marker standing alone: a number placeholder not part of a longer number (letters or CJK
    around it are fine: "7001px", "见7001"), any other not part of a longer word."""
    if marker.isdigit():
        return re.compile(r"(?<!\d)" + marker + r"(?!\d)")
    before = r"(?<![A-Za-z0-9])" if marker[:1].isalnum() else ""
    after = r"(?![A-Za-z0-9])" if marker[-1:].isalnum() else ""
    return re.compile(before + re.escape(marker) + after)


def _insert(text: str, marker: str, share: float) -> str:
    """`marker` put in at the word boundary nearest `share` of the way through `text`."""
    if not text.strip():
        return marker
    bounds = [0] + [m.end() for m in re.finditer(r"\s+", text)] + [len(text)]
    at = min(bounds, key=lambda b: abs(b - share * len(text)))
    if at >= len(text):
        return text.rstrip() + " " + marker
    return text[:at] + marker + " " + text[at:]
