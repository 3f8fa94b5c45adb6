"""Pictures drawn from the code when the site is built (mkdocs-gen-files), never by hand.

Each figure reads what it shows from fbnops itself: the op specs' input and output names,
the canonical view of each layout, numbers computed by ``fbnops.raw_ops``, and the import
graph of the source tree.  The SVGs land in ``assets/figures/``.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import mkdocs_gen_files  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import figures_arch  # noqa: E402

import fbnops  # noqa: E402
from fbnops.framework.layouts import channel_axis  # noqa: E402
from fbnops.specs import get_spec  # noqa: E402

CHANNEL_COLOURS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52"]
plt.rcParams.update({"font.size": 10, "svg.fonttype": "path", "svg.hashsalt": "fbnops"})


def save(fig, name: str) -> None:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    with mkdocs_gen_files.open(f"assets/figures/{name}.svg", "w") as f:
        f.write(buf.getvalue())


# ------------------------------------------------------------------------------ layouts


def canonical_shape(shape: tuple[int, ...], data_format: str) -> tuple[int, int, int]:
    """The kernels' (outer, C, inner) view, asked of fbnops itself."""
    from fbnops.ops.canonical import NdView

    return tuple(NdView.for_data_format(shape, data_format).view)


def layouts_figure() -> None:
    n, c, d, h, w = 2, 3, 2, 2, 2
    cases = [("NHWC", (n, h, w, c)), ("NCHW", (n, c, h, w)), ("NDHWC", (n, d, h, w, c)), ("NCDHW", (n, c, d, h, w))]
    fig, axes = plt.subplots(len(cases), 1, figsize=(11, 7.6))
    for ax, (fmt, shape) in zip(axes, cases, strict=True):
        axis = channel_axis(fmt, len(shape))
        channel = np.indices(shape)[axis].ravel()  # the channel of each element, in memory order
        sample = np.indices(shape)[0].ravel()
        outer, C, inner = canonical_shape(shape, fmt)
        for i, (ch, s) in enumerate(zip(channel, sample, strict=True)):
            ax.add_patch(
                Rectangle((i, 0), 1, 1, facecolor=CHANNEL_COLOURS[ch], alpha=1.0 if s == 0 else 0.55, edgecolor="w")
            )
        # one bar per row of the canonical view: all C channels of one position (channels-last),
        # or the `inner` values of one channel of one sample (channels-first)
        run = C if inner == 1 else inner
        for start in range(0, len(channel), run):
            ax.add_patch(Rectangle((start, -0.25), run, 0.18, facecolor="#333", edgecolor="w", lw=2))
        ax.set_xlim(-0.5, len(channel) + 0.5)
        ax.set_ylim(-0.45, 1.05)
        ax.axis("off")
        ax.set_title(
            f"{fmt} {list(shape)}  ->  canonical view (outer, C, inner) = ({outer}, {C}, {inner}):  "
            + ("rows of C channels side by side" if inner == 1 else f"runs of {inner} values of one channel"),
            loc="left",
            fontsize=10,
        )
    handles = [Rectangle((0, 0), 1, 1, facecolor=col) for col in CHANNEL_COLOURS[:c]]
    fig.legend(
        handles,
        [f"channel {i}" for i in range(c)],
        loc="lower center",
        ncol=c,
        frameon=False,
        bbox_to_anchor=(0.5, 0.03),
    )
    fig.text(
        0.5,
        0.0,
        "memory order, left to right; pale: the second sample; dark bars: one row of the view each",
        ha="center",
        fontsize=9,
        color="#555",
    )
    fig.subplots_adjust(hspace=0.75, bottom=0.12)
    save(fig, "layouts")


# ------------------------------------------------------------------------------ data flow


def box(ax, x, y, text, width=2.1, colour="#EEF2F8", edge="#4C72B0", fontsize=9, height=0.42):
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2), width, height, boxstyle="round,pad=0.04", facecolor=colour, edgecolor=edge
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, family="monospace")


def arrow(ax, start, end, colour="#555", style="-|>"):
    ax.add_patch(
        FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, color=colour, lw=1.1, shrinkA=4, shrinkB=4)
    )


def dataflow_figure() -> None:
    fwd, grad = get_spec("FusedBatchNormV3"), get_spec("FusedBatchNormGradV3")
    fig, ax = plt.subplots(figsize=(11, 6.2))
    ax.set_xlim(0, 11)
    ax.set_ylim(-0.3, 7.2)
    ax.axis("off")
    ax.add_patch(FancyBboxPatch((3.6, 5.4), 3.6, 0.8, boxstyle="round,pad=0.05", facecolor="#DDE7F4", edgecolor="#333"))
    ax.text(5.4, 5.8, fwd.name, ha="center", va="center", fontsize=12, weight="bold")
    ax.add_patch(FancyBboxPatch((3.6, 1.3), 3.6, 0.8, boxstyle="round,pad=0.05", facecolor="#F6E3D4", edgecolor="#333"))
    ax.text(5.4, 1.7, grad.name, ha="center", va="center", fontsize=12, weight="bold")
    ins = [a.name for a in fwd.inputs]
    for i, name in enumerate(ins):
        x = 1.3 + i * 2.1
        box(ax, x, 6.9, name, width=1.7)
        arrow(ax, (x, 6.68), (5.4 + (x - 5.4) * 0.35, 6.25))
    reserve = [o.name for o in fwd.outputs if o.name.startswith("reserve_space")]
    others = [o.name for o in fwd.outputs if not o.name.startswith("reserve_space")]
    for i, name in enumerate(others):
        y = 5.2 - i * 0.55
        box(ax, 9.6, y, name, width=2.2, colour="#F4F4F4", edge="#999")
        arrow(ax, (7.25, 5.7), (8.45, y))
    notes = {"reserve_space_1": "batch mean", "reserve_space_2": "biased variance", "reserve_space_3": "empty on CPU"}
    for i, name in enumerate(reserve):
        x = 3.2 + i * 2.2
        box(ax, x, 3.6, f"{name}\n({notes.get(name, '')})", width=2.0, height=0.6, colour="#FFF7D6", edge="#C9A227")
        arrow(ax, (5.4 + (x - 5.4) * 0.4, 5.35), (x, 3.92))
        arrow(ax, (x, 3.28), (5.4 + (x - 5.4) * 0.4, 2.15))
    for name, x, width in (("y_backprop\n(dL/dy)", 0.8, 1.4), ("x", 2.3, 0.9), ("scale", 9.0, 1.4)):
        box(ax, x, 2.6, name, width=width, height=0.55)
        arrow(ax, (x, 2.32), (3.65 if x < 5 else 7.15, 1.8))
    for i, o in enumerate(grad.outputs):
        x = 1.2 + i * 2.15
        label = {
            "x_backprop": "x_backprop\n(dL/dx)",
            "scale_backprop": "scale_backprop\n(dL/dscale)",
            "offset_backprop": "offset_backprop\n(dL/doffset)",
        }.get(o.name, f"{o.name}\n(placeholder)")
        box(
            ax,
            x,
            0.2,
            label,
            width=2.0,
            height=0.6,
            colour="#F4F4F4" if "reserve" in o.name else "#E8F3E8",
            edge="#999" if "reserve" in o.name else "#55A868",
        )
        arrow(ax, (5.4 + (x - 5.4) * 0.35, 1.25), (x, 0.52))
    ax.text(
        0.1,
        4.3,
        "The forward op hands its batch\nstatistics to the gradient op\nthrough the reserve spaces.",
        fontsize=9,
        color="#555",
        va="center",
    )
    save(fig, "dataflow")


# ------------------------------------------------------------------------------ the gradient's computation

NODES = {  # name: (x, y, formula)
    "x": (1.6, 6.0, r"$x_i$"),
    "g": (8.6, 6.0, r"$g_i = \partial L/\partial y_i$  (y_backprop)"),
    "mu": (1.6, 4.8, r"$\mu = \frac{1}{n}\sum_i x_i$"),
    "xc": (1.6, 3.6, r"$x_i - \mu$"),
    "var": (4.2, 3.6, r"$\sigma^2 = \frac{1}{n}\sum_i (x_i-\mu)^2$"),
    "r": (4.2, 2.4, r"$r = 1/\sqrt{\sigma^2+\epsilon}$"),
    "sg": (9.2, 4.8, r"$\sum_i g_i$"),
    "sgx": (7.0, 3.6, r"$\sum_i g_i\,(x_i-\mu)$"),
    "db": (9.6, 1.1, r"$\partial L/\partial\beta = \sum_i g_i$"),
    "dg": (7.0, 1.1, r"$\partial L/\partial\gamma = r \sum_i g_i (x_i-\mu)$"),
    "dx": (
        3.2,
        -0.1,
        r"$\partial L/\partial x_i = \gamma r\,\left(g_i - \frac{1}{n}\sum g"
        r" - (x_i-\mu)\,r^2\,\frac{1}{n}\sum g(x-\mu)\right)$",
    ),
}
EDGES = [
    ("x", "mu"),
    ("x", "xc"),
    ("mu", "xc"),
    ("xc", "var"),
    ("var", "r"),
    ("g", "sg"),
    ("g", "sgx"),
    ("xc", "sgx"),
    ("sg", "db"),
    ("sgx", "dg"),
    ("r", "dg"),
    ("r", "dx"),
    ("xc", "dx"),
    ("sg", "dx"),
    ("sgx", "dx"),
    ("g", "dx"),
]
OUTPUTS = {"db", "dg", "dx"}
REDUCTIONS = {"mu", "var", "sg", "sgx"}


def gradient_graph_figure() -> None:
    fig, ax = plt.subplots(figsize=(11, 6.4))
    ax.set_xlim(-0.6, 11)
    ax.set_ylim(-0.6, 6.5)
    ax.axis("off")
    for a, b in EDGES:
        (x0, y0, _), (x1, y1, _) = NODES[a], NODES[b]
        arrow(ax, (x0, y0 - 0.22), (x1, y1 + 0.22), colour="#888")
    for name, (x, y, tex) in NODES.items():
        colour = "#E8F3E8" if name in OUTPUTS else "#FFF7D6" if name in REDUCTIONS else "#EEF2F8"
        ax.text(
            x,
            y,
            tex,
            ha="center",
            va="center",
            fontsize=11,
            bbox=dict(boxstyle="round,pad=0.35", facecolor=colour, edgecolor="#777"),
        )
    ax.text(
        10.9,
        -0.5,
        "yellow: a per-channel sum (one pass over the batch)\ngreen: the op's outputs",
        ha="right",
        va="bottom",
        fontsize=9,
        color="#555",
    )
    save(fig, "gradient_graph")


# ------------------------------------------------------------------------------ training vs frozen


def modes_figure() -> None:
    """Numbers from fbnops.raw_ops: one channel of 12 values, both gradients."""
    rng = np.random.default_rng(7)
    x = rng.normal(2.0, 1.5, (12, 1, 1, 1)).astype(np.float32)
    dy = (0.6 + 0.3 * rng.standard_normal((12, 1, 1, 1))).astype(np.float32)  # a gradient with a mean and a slope
    scale, offset, none = np.ones(1, np.float32), np.zeros(1, np.float32), np.zeros(0, np.float32)
    fwd = fbnops.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=none, variance=none)
    common = dict(y_backprop=dy, x=x, scale=scale, reserve_space_3=fwd.reserve_space_3)
    train = fbnops.raw_ops.FusedBatchNormGradV3(
        **common, reserve_space_1=fwd.reserve_space_1, reserve_space_2=fwd.reserve_space_2, is_training=True
    ).x_backprop.ravel()
    frozen = fbnops.raw_ops.FusedBatchNormGradV3(
        **common, reserve_space_1=fwd.reserve_space_1, reserve_space_2=fwd.reserve_space_2, is_training=False
    ).x_backprop.ravel()
    order = np.argsort(x.ravel())
    xs = x.ravel()[order]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    for ax, dx, title in (
        (axes[0], frozen, r"frozen: $\partial L/\partial x_i = \gamma r\, g_i$"),
        (axes[1], train, r"training: $\gamma r\,(g_i - \overline{g} - \hat x_i\,\overline{g\,\hat x})$"),
    ):
        ax.axhline(0, color="#999", lw=0.8)
        ax.plot(xs, dy.ravel()[order], "o", color="#BBB", label=r"$g_i$ (y_backprop)")
        ax.plot(xs, dx[order], "o-", color="#4C72B0", label=r"$\partial L/\partial x_i$ (x_backprop)")
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("x (one channel, 12 values, sorted)")
        ax.text(0.02, 0.04, f"sum of x_backprop = {dx.sum():+.3f}", transform=ax.transAxes, fontsize=9, color="#333")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False, bbox_to_anchor=(0.5, -0.08))
    fig.suptitle(
        r"Training removes the gradient's mean and its slope along $\hat x$; frozen statistics keep both",
        fontsize=10,
        color="#333",
        y=1.03,
    )
    save(fig, "modes")


layouts_figure()
dataflow_figure()
gradient_graph_figure()
modes_figure()
save(figures_arch.architecture_figure(Path(__file__).resolve().parent.parent), "architecture")
