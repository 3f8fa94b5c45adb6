"""The course's notebooks as site pages (mkdocs-gen-files), converted when the site is built.

Each ``docs/tutorials/NN_name.ipynb`` becomes ``tutorials/NN_name.md``: markdown cells as they
are, code cells as fenced Python, text outputs as ``text`` blocks, images as PNG files written
beside the page.  The notebooks are committed executed, so the pages show real outputs without
running anything here.  Links between notebooks point at their pages; each page links to its
notebook for download (mkdocs copies the ``.ipynb`` files into the site as they are).
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import mkdocs_gen_files

TUTORIALS = Path(__file__).parent / "tutorials"
# a link to a sibling notebook, ``(03_graphs.ipynb)`` or ``(03_graphs.ipynb#part)``
NOTEBOOK_LINK = re.compile(r"\]\((\d\d_[A-Za-z0-9_]+)\.ipynb(#[^)]*)?\)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # tracebacks and warnings may carry colour codes


def fenced(text: str, language: str = "") -> str:
    """A fence longer than any run of backticks inside ``text``."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def output_blocks(outputs: list[dict], images: list[tuple[str, bytes]], stem: str) -> list[str]:
    """Markdown for one code cell's outputs; PNG images are appended to ``images`` (name, bytes)."""
    blocks = []
    for out in outputs:
        kind = out["output_type"]
        if kind == "stream":
            blocks.append(fenced(ANSI.sub("", "".join(out["text"])), "text"))
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            if "image/png" in data:
                name = f"{stem}_{len(images) + 1}.png"
                images.append((name, base64.b64decode("".join(data["image/png"]))))
                blocks.append(f"![output {len(images)} of {stem}]({stem}_files/{name})")
            elif "text/plain" in data:
                blocks.append(fenced("".join(data["text/plain"]), "text"))
        elif kind == "error":  # committed notebooks have none (tests/test_notebooks.py); shown if one slips in
            blocks.append(fenced(ANSI.sub("", "\n".join(out["traceback"])), "text"))
    return blocks


def notebook_page(path: Path) -> tuple[str, list[tuple[str, bytes]]]:
    """The page's Markdown and its images."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    images: list[tuple[str, bytes]] = []
    parts = []
    for i, cell in enumerate(nb["cells"]):
        text = source(cell)
        if cell["cell_type"] == "markdown":
            text = NOTEBOOK_LINK.sub(lambda m: f"]({m.group(1)}.md{m.group(2) or ''})", text)
            if i == 0:  # after the title: where to get the notebook itself
                title, _, rest = text.partition("\n")
                text = (
                    f"{title}\n\n[Download the notebook]({path.name}){{ download }} and run it with "
                    f'Jupyter (`pip install -e ".[course]"`), or read it here with its outputs.\n{rest}'
                )
            parts.append(text)
        elif cell["cell_type"] == "code":
            parts.append(fenced(text, "python"))
            parts += output_blocks(cell.get("outputs", []), images, path.stem)
    return "\n\n".join(parts) + "\n", images


for notebook in sorted(TUTORIALS.glob("*.ipynb")):
    page, pictures = notebook_page(notebook)
    with mkdocs_gen_files.open(f"tutorials/{notebook.stem}.md", "w") as f:
        f.write(page)
    mkdocs_gen_files.set_edit_path(f"tutorials/{notebook.stem}.md", f"tutorials/{notebook.name}")
    for name, data in pictures:
        with mkdocs_gen_files.open(f"tutorials/{notebook.stem}_files/{name}", "wb") as f:
            f.write(data)
