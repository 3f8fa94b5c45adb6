"""Pages generated from the code when the site is built (mkdocs-gen-files).

* ``runfile.md``: the run-file reference, read from the JSON Schema that ships with fbnops
  (the same schema ``fbnops run`` validates every file with), so the page cannot drift;
* the end of ``math.md``: every step of the derivation with numbers, from
  ``fbnops.tools.explain`` (which checks itself against the kernels).
"""

from __future__ import annotations

import json
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


with mkdocs_gen_files.open("runfile.md", "w") as f:
    f.write(runfile_page())
with mkdocs_gen_files.open("math.md", "a") as f:
    f.write(worked_example())
