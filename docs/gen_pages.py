"""Pages generated at build time (mkdocs-gen-files): one op reference page per op spec,
the performance page's tables from the committed benchmark results, and the hostile-input
page's figures from the committed run of the attacks (``docs/assets/reliability.json``)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import mkdocs_gen_files

import fbnops
from bindings_mirror.generate import camel, pascal
from fbnops.specs import OpSpec, all_specs

KIND = {
    "channels": "`[C]`",
    "any": "any shape (unused on CPU)",
    "scalar0": "rank 0",
    "empty": "`[0]`",
}


def shape_text(spec: OpSpec, kind: str) -> str:
    """An argument's shape in words; a data tensor's from the spec's DataSpec."""
    if kind != "tensor":
        return KIND[kind]
    data = spec.data
    ranks = " or ".join(f"{r}-D" for r in data.ranks)
    if data.layout_attr is not None:
        return f"{ranks}, laid out by `{data.layout_attr}`"
    where = "the last axis" if data.channel_axis == -1 else f"axis {data.channel_axis}"
    return f"{ranks}, channels on {where}"


def attr_default(attr) -> str:
    return "required" if attr.required else f"`{attr.default!r}`"


def types_of(spec: OpSpec, t: str) -> str:
    return ", ".join(f"`{x}`" for x in spec.type_attrs[t]) if t in spec.type_attrs else f"`{t}`"


def allowed(attr) -> str:
    return ", ".join(f"`{v}`" for v in attr.allowed) if attr.allowed else "any"


def op_page(spec: OpSpec) -> str:
    s = spec.surfaces
    ins, outs = spec.input_names, spec.output_names
    params = inspect.signature(getattr(fbnops.raw_ops, spec.name)).parameters.values()
    # one parameter per line: the signature reads without scrolling sideways
    py_sig = (
        f"fbnops.raw_ops.{spec.name}(\n        *,\n"
        + "".join(
            f"        {p.name}: {p.annotation}{'' if p.default is p.empty else f' = {p.default!r}'},\n"
            for p in params
            if p.kind is p.KEYWORD_ONLY
        )
        + "    )"
    )
    optional, required = spec.optional_attrs, [a.name for a in spec.required_attrs]
    cc_attrs = "".join(f".{pascal(a.name)}(...)" for a in optional[:2])
    cc_tail = f"[, {s.cc_class}.Attrs(){cc_attrs}]" if optional else ""
    java_args = ", ".join(camel(n) for n in (*ins, *required)) + (", *options" if optional else "")
    java_options = ", ".join(f"{s.java_class}.{camel(a.name)}(...)" for a in optional) or "none"
    lines = [
        f"# {spec.name}",
        "",
        f"**{spec.summary}** {spec.description}",
        "",
        "*Generated from `fbnops/specs` when the site is built.*",
        "",
        "## Signatures in every API",
        "",
        '=== "Python (tf.raw_ops)"',
        "",
        f"    ```python\n    {py_sig}\n    ```",
        "",
        '=== "C++ (tensorflow::ops)"',
        "",
        f"    ```python\n    ops.{s.cc_class}(scope, {', '.join((*ins, *required))}{cc_tail})\n"
        f"    # public members: operation, {', '.join(outs)}\n    ```",
        "",
        f'=== "Java (org.tensorflow.op.{s.java_package})"',
        "",
        f"    ```python\n    {s.java_class}.create(scope, {java_args})   "
        f"# tf.{'nn.' if s.java_package == 'nn' else ''}{s.java_endpoint}(...)\n"
        f"    # options: {java_options}\n"
        f"    # accessors: {', '.join(camel(n) + '()' for n in outs)}\n    ```",
        "",
        '=== "DirectML"',
        "",
        *([f"    - `{mode}`: `{desc}`" for mode, desc in s.directml] or ["    No equivalent operator listed."]),
        "",
        '=== "oneDNN Graph"',
        "",
        *([f"    - `{mode}`: {desc}" for mode, desc in s.onednn] or ["    No equivalent operator listed."]),
        "",
        "## Inputs",
        "",
        "| # | name | type | shape | description |",
        "|---|---|---|---|---|",
        *[
            f"| {i} | `{a.name}` | {types_of(spec, a.type)} | {shape_text(spec, a.kind)} | {a.doc} |"
            for i, a in enumerate(spec.inputs)
        ],
        "",
        "## Attributes",
        "",
        "| name | type | default | allowed | description |",
        "|---|---|---|---|---|",
        *[f"| `{a.name}` | {a.type} | {attr_default(a)} | {allowed(a)} | {a.doc} |" for a in spec.attrs],
        "",
        "## Outputs",
        "",
        "| # | name | type | shape | description |",
        "|---|---|---|---|---|",
        *[
            f"| {i} | `{a.name}` | {types_of(spec, a.type)} | {shape_text(spec, a.kind)} | {a.doc} |"
            for i, a in enumerate(spec.outputs)
        ],
        "",
        "## Type constraints",
        "",
        *[
            f"- `{t}` in {{{', '.join(v)}}}; CPU kernels: {{{', '.join(spec.kernel_type_attrs[t])}}}"
            for t, v in spec.type_attrs.items()
        ],
        "",
    ]
    if spec.deprecation is not None:
        d = spec.deprecation
        lines[4:4] = [
            f'!!! warning "Removed at GraphDef version {d.version}"',
            f"    TensorFlow refuses this op in a GraphDef whose `versions.producer` is {d.version} or later, "
            f'so in its own eager and graph APIs too ("{d.explanation}"). fbnops runs it as TensorFlow '
            "did before, and refuses it when an imported GraphDef's producer is that recent.",
            "",
        ]
    if spec.gradient:  # linked when it is a public op; the spec says what it is fed
        name = (
            f"[`{spec.gradient}`]({spec.gradient}.md)"
            if spec.gradient in {s.name for s in all_specs()}
            else (f"`{spec.gradient}`")
        )
        lines += ["## Gradient", "", f"Registered gradient: {name}. {spec.gradient_doc}".rstrip(), ""]
    return "\n".join(lines)


for spec in all_specs():
    with mkdocs_gen_files.open(f"ops/{spec.name}.md", "w") as f:
        f.write(op_page(spec))


def performance_tables() -> str:
    path = Path("docs/assets/bench.json")
    if not path.exists():
        return "*No benchmark results are committed yet: run* `fbnops bench --json docs/assets/bench.json`.\n"
    from fbnops.tools.bench.report import markdown

    return markdown(json.loads(path.read_text()))


def bound_measurement() -> str:
    """The committed output of ``python -m fbnops.tools.bench.bound`` on the machine of bench.json."""
    path = Path("docs/assets/bound.txt")
    if not path.exists():
        return "*No measurement is committed yet: run* `python -m fbnops.tools.bench.bound > docs/assets/bound.txt`.\n"
    return "Measured (`python -m fbnops.tools.bench.bound`):\n\n```text\n" + path.read_text().rstrip() + "\n```\n"


def reliability_figures() -> str:
    """The hostile-input table from the committed run of ``benchmarks/reliability.py --json``."""
    path = Path("docs/assets/reliability.json")
    if not path.exists():
        return "*No run is committed yet: run* `python benchmarks/reliability.py --json " + str(path) + "`.\n"
    from fbnops.tools.bench.attack_report import markdown

    return markdown(json.loads(path.read_text()))


def page_from_template(page: str, **fills: str) -> None:
    """``docs/<page>.in`` with each ``{{ name }}`` replaced, written as ``<page>``."""
    text = Path(f"docs/{page}.in").read_text()
    for name, value in fills.items():
        text = text.replace("{{ " + name + " }}", value)
    with mkdocs_gen_files.open(page, "w") as f:
        f.write(text)


page_from_template("performance.md", tables=performance_tables(), bound=bound_measurement())
page_from_template("reliability.md", attacks=reliability_figures())
