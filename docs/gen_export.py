"""The export page's five exports, side by side (mkdocs-gen-files, at build time).

``docs/export.md`` builds its prototype in its first ```python block; this script runs that
block, exports the result to every target with the real exporter (``build_plan`` + each
target's ``render``), and puts the files in tabs where the page has ``<!-- exports -->``. So
the page always shows what ``fbnops export`` writes today, for the code the page shows.
"""

from __future__ import annotations

import re
from pathlib import Path

import mkdocs_gen_files

from fbnops.tools.export import TARGETS, build_plan, target_module

PAGE = "export.md"
MARKER = "<!-- exports -->"
TITLES = {"tf-python": "TF Python", "tf-cc": "TF C++", "tf-java": "TF Java", "onednn-graph": "oneDNN Graph",
          "directml": "DirectML"}  # fmt: skip
LANGUAGES = {".py": "python", ".cc": "cpp", ".cpp": "cpp", ".h": "cpp", ".java": "java", ".xml": "xml", ".sh": "bash"}
SUPPORT = re.compile(r"npy|shim", re.I)  # the .npy readers and the ClientSession shim: listed, not shown


def prototype(page: str) -> dict:
    """The names the page's first ```python block defines (``scope``, ``feeds``, ``fetches``...)."""
    block = re.search(r"^```python\n(.*?)^```", page, re.S | re.M).group(1)
    names: dict = {}
    exec(compile(block, f"docs/{PAGE} (first python block)", "exec"), names)
    return names


def tab(title: str, body: list[str], indent: str) -> list[str]:
    return [f'{indent}=== "{title}"', "", *(f"{indent}    {line}" if line else "" for line in body), ""]


def exports(names: dict) -> str:
    plan = build_plan(names["scope"], feeds=names["feeds"], fetches=names["fetches"], source="the prototype above")
    lines: list[str] = []
    for target in TARGETS:
        files = target_module(target).render(plan)
        shown = [name for name in files if not SUPPORT.search(Path(name).name)]
        shown.sort(key=lambda n: (n == "run.sh", n.endswith(".xml"), n))  # the program first, run.sh last
        inner: list[str] = []
        for name in shown:
            code = [f"```{LANGUAGES.get(Path(name).suffix, 'text')}", *files[name].rstrip("\n").split("\n"), "```"]
            inner += tab(name, code, "")
        support = sorted(set(files) - set(shown))
        if support:
            inner.append(f"Also written: {', '.join(f'`{n}`' for n in support)} (support code), and `inputs/*.npy`.")
        lines += tab(f"{TITLES[target]} ({target})", inner, "")
    return "\n".join(lines)


text = Path("docs", PAGE).read_text(encoding="utf-8")
with mkdocs_gen_files.open(PAGE, "w") as f:
    f.write(text.replace(MARKER, exports(prototype(text))))
