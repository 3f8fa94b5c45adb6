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


class UnrenderedMath(ValueError):
    """A formula that could not be turned into MathML (fails the strict build)."""


def to_mathml(tex: str, display: bool) -> str:
    tex = _TEXT_ESCAPE.sub(lambda m: f"\\{m.group(1)}{{{m.group(2).replace(chr(92) + '_', '_')}}}", tex)
    try:
        return convert(tex, display="block" if display else "inline")
    except Exception as exc:  # latex2mathml raises plain exceptions for unknown commands
        raise UnrenderedMath(f"cannot render formula {tex!r}: {exc}") from exc


def on_page_content(content: str, page, config, files) -> str:
    def render(m: re.Match) -> str:
        tex = html.unescape(m.group("tex"))
        display = m.group("open") == "["
        mathml = to_mathml(tex, display)
        tag = "div" if display else "span"
        return f'<{tag} class="arithmatex">{mathml}</{tag}>'

    return _FORMULA.sub(render, content)
