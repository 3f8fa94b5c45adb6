"""The architecture picture: fbnops' import graph, read from the source at docs build."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

# Layers, bottom to top: a module may import its own layer or the ones below it.
LAYERS = [
    ("specs", ["fbnops.specs"]),
    ("framework", ["fbnops.framework"]),
    ("ops", ["fbnops.ops"]),
    ("kernels", ["fbnops.kernels"]),
    (
        "surfaces",
        [  # in their rank order, lowest first (tests/test_layers.py: SURFACE_RANKS)
            "fbnops.raw_ops",
            "bindings_mirror",
            "fbnops.distributed",
            "fbnops.testing",
            "fbnops.tools",
            "fbnops.cli",
        ],
    ),
]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(root: Path, path: Path) -> set[str]:
    """Every module a file imports, at module level or inside functions, resolved to absolute names."""
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m.startswith(("fbnops", "bindings_mirror"))}


def group_of(module: str) -> str | None:
    """The box a module is drawn in: a package of fbnops, or a mirror."""
    if module.startswith("bindings_mirror."):
        return ".".join(module.split(".")[:2])
    for _, prefixes in LAYERS:
        for p in prefixes:
            if module == p or module.startswith(p + "."):
                return p
    return None


def package_edges(root: Path) -> Counter:
    """(importer group, imported group) -> number of import statements' targets."""
    edges: Counter = Counter()
    files = [*root.joinpath("fbnops").rglob("*.py"), *root.joinpath("bindings_mirror").rglob("*.py")]
    for path in files:
        src = group_of(module_name(root, path))
        for target in imports_of(root, path):
            dst = group_of(target)
            if src and dst and src != dst:
                edges[src, dst] += 1
    return edges


def rank(group: str) -> int:
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(group == p or group.startswith(p + ".") for p in prefixes):
            return i
    raise KeyError(group)


def row_of(group: str) -> float:
    """Where a box is drawn: its layer's row; the mirrors get a row of their own above the surfaces."""
    return rank(group) * 1.6 + (1.3 if group.startswith("bindings_mirror") else 0.0)


def architecture_figure(root: Path):
    edges = package_edges(root)
    edges = Counter({e: n for e, n in edges.items() if "bindings_mirror" not in e})  # the bare package: re-exports
    groups = sorted({g for e in edges for g in e} | {p for _, ps in LAYERS[:4] for p in ps}, key=rank)
    rows: dict[float, list[str]] = {}
    for g in groups:
        rows.setdefault(row_of(g), []).append(g)
    pos = {}
    for y, members in rows.items():
        for i, g in enumerate(sorted(members)):
            pos[g] = ((i + 0.5) * 12 / len(members), y)
    fig, ax = plt.subplots(figsize=(13, 7.2))
    ax.set_xlim(-0.9, 12.2)
    ax.set_ylim(-0.6, max(rows) + 0.6)
    ax.axis("off")
    upward = 0
    for (src, dst), _count in sorted(edges.items()):
        up = rank(dst) > rank(src)
        upward += up
        ax.add_patch(
            FancyArrowPatch(
                pos[src],
                pos[dst],
                arrowstyle="-|>",
                mutation_scale=10,
                lw=2.0 if up else 0.7,
                color="#C44E52" if up else "#9AA5B1",
                alpha=0.9,
                shrinkA=16,
                shrinkB=16,
                connectionstyle="arc3,rad=0.08",
            )
        )
    for g, (x, y) in pos.items():
        label = g.removeprefix("fbnops.").replace("bindings_mirror.", "mirror: ")
        half = min(0.9, 0.44 * 12 / len(rows[row_of(g)]))
        ax.add_patch(
            FancyBboxPatch(
                (x - half, y - 0.22),
                2 * half,
                0.44,
                boxstyle="round,pad=0.03",
                facecolor="#EEF2F8",
                edgecolor="#4C72B0",
            )
        )
        ax.text(x, y, label, ha="center", va="center", fontsize=8, family="monospace")
    for r, (name, _) in enumerate(LAYERS):
        ax.text(-0.85, r * 1.6, name, fontsize=10, weight="bold", color="#555", va="center")
    ax.text(
        -0.85,
        row_of("bindings_mirror.java"),
        "mirrors\n(surfaces)",
        fontsize=10,
        weight="bold",
        color="#555",
        va="center",
    )
    ax.set_title(
        f"Who imports whom (arrows point to the imported package); upward imports: {upward}",
        fontsize=11,
    )
    return fig
