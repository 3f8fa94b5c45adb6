"""mkdocs hook: render the pages' TeX to MathML when the site is built.

`pymdownx.arithmatex` (generic mode) wraps each formula as ``\\( … \\)`` or ``\\[ … \\]``
inside an ``arithmatex`` span/div.  This hook replaces each one with MathML from
`latex2mathml`, so browsers show the math without any script and without network.
"""

from __future__ import annotations

import html
import re

from latex2mathml.converter import convert

# <span class="arithmatex">\(…\)</span> or <div class="arithmatex">\[…\]</div>
_FORMULA = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\s*\\(?P<open>[(\[])(?P<tex>.*?)\\[)\]]\s*</(?P=tag)>',
    re.S,
)
# latex2mathml keeps "\_" literally inside \text{…}-like groups
_TEXT_ESCAPE = re.compile(r"\\(text|texttt|mathrm|textrm|mathtt)\{([^{}]*)\}")
# sum, product, integral (and their double forms): the operators display math draws large
_LARGE_OPERATOR = re.compile(r"<mo>(&#x0(?:2211|220F|2210|222B|222C|222D|222E);)</mo>")


class UnrenderedMath(ValueError):
    """A formula that could not be turned into MathML (fails the strict build)."""


def to_mathml(tex: str, display: bool) -> str:
    tex = _TEXT_ESCAPE.sub(lambda m: f"\\{m.group(1)}{{{m.group(2).replace(chr(92) + '_', '_')}}}", tex)
    try:
        mathml = convert(tex, display="block" if display else "inline")
    except Exception as exc:  # latex2mathml raises plain exceptions for unknown commands
        raise UnrenderedMath(f"cannot render formula {tex!r}: {exc}") from exc
    if display:
        # A browser draws a large operator at display size only from a font with an OpenType MATH
        # table, which most machines lack (Chromium then draws the sum at text size): mark the
        # operator so the stylesheet can size it (class "large-operator" in extra.css).
        mathml = _LARGE_OPERATOR.sub(r'<mo largeop="true" class="large-operator">\1</mo>', mathml)
    return mathml


# inline TeX in a heading: the table of contents shows the heading's text, not its MathML
_INLINE_TEX = re.compile(r"\\\((.*?)\\\)")


_TAG = re.compile(r"<[^>]+>")


def plain_titles(items) -> None:
    """Table-of-contents titles with their inline TeX as the text it renders to (``\\(\\mu\\)`` -> ``μ``)."""
    for item in items:
        item.title = _INLINE_TEX.sub(
            lambda m: html.escape(html.unescape(_TAG.sub("", to_mathml(html.unescape(m.group(1)), False)))),
            item.title,
        )
        plain_titles(item.children)


def on_page_content(content: str, page, config, files) -> str:
    plain_titles(page.toc)

    def render(m: re.Match) -> str:
        tex = html.unescape(m.group("tex"))
        display = m.group("open") == "["
        mathml = to_mathml(tex, display)
        tag = "div" if display else "span"
        return f'<{tag} class="arithmatex">{mathml}</{tag}>'

    return _FORMULA.sub(render, content)
