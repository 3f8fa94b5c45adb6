"""Pages generated from the code when the site is built (mkdocs-gen-files).

* ``runfile.md``: the run-file reference, read from the JSON Schema that ships with fbnops
  (the same schema ``fbnops run`` validates every file with), so the page cannot drift;
* the end of ``math.md``: every step of the derivation with numbers, from
  ``fbnops.tools.explain`` (which checks itself against the kernels);
* ``api.md``: the API reference, one entry per public name of each public module (its
  ``__all__``), rendered by mkdocstrings from the docstrings themselves.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from importlib import resources

import mkdocs_gen_files

from fbnops.tools.explain import example_inputs, explain

# ------------------------------------------------------------------------------ run-file reference


def type_of(node: dict) -> str:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name})"
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "oneOf" in node:
        return " or ".join(type_of(n) for n in node["oneOf"] if "required" not in n)
    kind = node.get("type", "")
    if kind == "array" and "items" in node:
        return f"list of {type_of(node['items'])}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"object: name → {type_of(node['additionalProperties'])}"
    return kind or "any"


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def example_of(node: dict) -> str:
    examples = node.get("examples")
    return f"`{cell(json.dumps(examples[0]))}`" if examples else ""


def properties_table(node: dict) -> list[str]:
    required = set(node.get("required", ()))
    rows = ["| key | type | default | description |", "|---|---|---|---|"]
    for key, sub in node["properties"].items():
        default = "**required**" if key in required else f"`{json.dumps(sub['default'])}`" if "default" in sub else ""
        example = f"<br>Example: {example_of(sub)}" if sub.get("examples") else ""
        rows.append(f"| `{key}` | {type_of(sub)} | {default} | {cell(sub.get('description', ''))}{example} |")
    return rows


def section(name: str, node: dict, level: str = "##") -> list[str]:
    lines = [f"{level} {name}", "", cell(node.get("description", "")), ""]
    if "properties" in node:
        lines += properties_table(node)
        if any("required" in n for n in node.get("oneOf", ())):
            keys = ", ".join(f"`{n['required'][0]}`" for n in node["oneOf"])
            lines += ["", f"Exactly one of {keys}."]
        for key, sub in node["properties"].items():
            if "properties" in sub:  # a nested object gets its own table
                lines += ["", *section(f"{name}.{key}", sub, "###")]
    else:
        lines += [f"Type: {type_of(node)}. {example_of(node)}"]
    return lines + [""]


def runfile_page() -> str:
    schema = json.loads(resources.files("fbnops.tools").joinpath("runfile.schema.json").read_text())
    lines = [
        "# Run-file reference",
        "",
        "*Generated when the site is built from `fbnops/tools/runfile.schema.json`, the JSON Schema "
        "that `fbnops run` checks every run file against.* A run file is JSON, or YAML with PyYAML "
        "installed. Errors name the file, the line and column, and the key that is wrong.",
        "",
        *section("The file", schema),
    ]
    for name, node in schema["$defs"].items():
        lines += section(name, node)
    return "\n".join(lines)


# ------------------------------------------------------------------------------ the derivation, with numbers


def worked_example() -> str:
    steps = explain(**example_inputs())
    assert steps.ok, "fbnops explain disagrees with the kernels"
    return "\n".join(
        [
            "",
            "## Every step, with numbers",
            "",
            "*Generated when the site is built by `fbnops explain`, which computes each step in float64 "
            "and checks the result against the kernels; run it yourself for other shapes and layouts "
            "(`fbnops explain --help`).*",
            "",
            steps.to_markdown(),
        ]
    )


# ------------------------------------------------------------------------------ API reference

# The public modules, in reading order, each with what a reader should know first.
API_MODULES = {
    "fbnops.raw_ops": "The `tf.raw_ops` surface: keyword-only functions generated from the op specs "
    "(their documentation is TensorFlow's op documentation, from the specs).",
    "fbnops": "The top level: graphs, sessions, gradients, backends and threads.",
    "fbnops.errors": "TensorFlow's error classes; every failure of an op is one of them.",
    "fbnops.distributed": "Synchronized batch norm over communicators (MPI, torch.distributed, threads).",
    "fbnops.testing": "The public test kit (tolerances, float64 oracles, gradient check, crash-safe runner), "
    "in the spirit of `numpy.testing`.",
}
# Functions made when fbnops is imported, which mkdocstrings' static analysis cannot see (and
# inspecting the whole package would document every str attribute with str's own help text):
# their signatures and docstrings are read from the live objects here.
GENERATED = {"fbnops.raw_ops"}
_DOC_SECTION = re.compile(r"^(Args|Returns):$")
_DOC_ITEM = re.compile(r"^  (\w+): (.*)$")


def generated_function_entry(path: str, fn) -> list[str]:
    """A function's heading, signature (one parameter a line) and docstring, its Args as a table."""
    params = inspect.signature(fn).parameters.values()
    keyword_only = any(p.kind is p.KEYWORD_ONLY for p in params)  # as tf.raw_ops: every argument by name
    params = ("    *,\n" if keyword_only else "") + "".join(f"    {p},\n" for p in params)
    lines = [f"### `{path}` {{ #{path} }}", "", f"```python\n{path}(\n{params})\n```", ""]
    section = None
    for line in inspect.getdoc(fn).splitlines():
        item = _DOC_ITEM.match(line)
        if _DOC_SECTION.match(line):
            section = line[:-1]
            lines += [f"**{section}**", ""] + (["| argument | description |", "|---|---|"] if section == "Args" else [])
        elif item and section:
            if section == "Returns" and lines[-1] == "":
                lines += ["| output | description |", "|---|---|"]
            lines.append(f"| `{item[1]}` | {item[2].replace('|', chr(92) + '|')} |")
        elif line.strip() or lines[-1] != "":
            lines.append(line.strip())
    return lines + [""]


def documented_path(module, name: str) -> str | None:
    """Where mkdocstrings finds ``module.name``: there if the module binds it, else where it is defined
    (a name made on first use, through the module's ``__getattr__``); None if it cannot be imported here."""
    if name in vars(module):
        return f"{module.__name__}.{name}"
    try:
        obj = getattr(module, name)
    except ImportError:  # a name that needs an extra this build does not have
        return None
    return f"{obj.__module__}.{obj.__qualname__}"


def entry(path: str) -> list[str]:
    """An mkdocstrings entry: the object's docstring, signature and public members."""
    return [f"::: {path}", "    options:", "      heading_level: 3", "      show_root_full_path: true", ""]


def module_section(name: str, summary: str) -> list[str]:
    module = importlib.import_module(name)
    lines = [f"## `{name}`", "", summary, ""]
    for public in module.__all__:
        obj = module.__dict__.get(public)
        if inspect.ismodule(obj) or public.startswith("__"):
            continue  # a submodule has its own section; __version__ is shown below
        path = documented_path(module, public)
        if path is None:
            lines += [f"### `{name}.{public}`", "", "*Needs an extra this site was built without.*", ""]
        elif name in GENERATED:
            lines += generated_function_entry(path, getattr(module, public))
        else:
            lines += entry(path)
    return lines


def op_modules_section() -> list[str]:
    import fbnops.ops

    names = sorted(m.name for m in pkgutil.iter_modules(fbnops.ops.__path__) if m.name.startswith("fused_batch"))
    lines = [
        "## The op modules, `fbnops.ops.*`",
        "",
        "One module per op: its eager body, shape rule, graph binding and gradient, registered side by "
        "side. They are how the ops are built, not what a user calls: call the functions of "
        "[`fbnops.raw_ops`](#fbnopsraw_ops), or build graphs with `Scope`.",
        "",
    ]
    for name in names:
        lines += entry(f"fbnops.ops.{name}")
    return lines


def api_page() -> str:
    import fbnops

    lines = [
        "# API reference",
        "",
        "*Generated when the site is built from the docstrings of every public name: each module's "
        f"`__all__`. This is fbnops {fbnops.__version__}.* For a guided tour see "
        "[the Rosetta stone](rosetta.md); for the ops' inputs, attributes and outputs, the op reference pages "
        "(for example [FusedBatchNormGradV3](ops/FusedBatchNormGradV3.md)).",
        "",
    ]
    for name, summary in API_MODULES.items():
        lines += module_section(name, summary)
    return "\n".join(lines + op_modules_section())


with mkdocs_gen_files.open("api.md", "w") as f:
    f.write(api_page())
with mkdocs_gen_files.open("runfile.md", "w") as f:
    f.write(runfile_page())
with mkdocs_gen_files.open("math.md", "a") as f:
    f.write(worked_example())
