"""Hypothesis strategies for hostile inputs: shapes, strides, offsets and file formats.

Importing this module needs ``hypothesis`` (the ``test`` extra); the rest of
:mod:`fbnops.testing` does not.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

__all__ = [
    "shapes",
    "hostile_shapes",
    "strides",
    "offsets",
    "pbtxt_graphs",
    "mutated_pbtxt",
    "run_file_documents",
]

_HUGE = [0, 1, 2**31 - 1, 2**31, 2**32, 2**40, 2**62, 2**63 - 1]


def shapes(min_rank: int = 1, max_rank: int = 5, max_side: int = 6) -> st.SearchStrategy[tuple[int, ...]]:
    """Ordinary shapes (zero-size dimensions included)."""
    return st.lists(st.integers(0, max_side), min_size=min_rank, max_size=max_rank).map(tuple)


def hostile_shapes(min_rank: int = 0, max_rank: int = 8) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes an attacker writes: negative, zero, huge and int64-overflowing dimensions."""
    dim = st.one_of(st.integers(-3, 8), st.sampled_from(_HUGE), st.integers(-(2**63), 2**63 - 1))
    return st.lists(dim, min_size=min_rank, max_size=max_rank).map(tuple)


def strides(rank: int, itemsize: int = 4) -> st.SearchStrategy[tuple[int, ...]]:
    """Strides in elements or bytes: negative, zero (overlapping), unaligned and oversized."""
    one = st.one_of(
        st.integers(-64, 64),
        st.sampled_from([itemsize * k for k in (-1, 0, 1, 2)] + [2**31, 2**62, -(2**62)]),
    )
    return st.lists(one, min_size=rank, max_size=rank).map(tuple)


def offsets() -> st.SearchStrategy[int]:
    """Byte offsets and sizes of a buffer binding: negative, zero, unaligned, past the end, huge."""
    return st.one_of(st.integers(-16, 1 << 12), st.sampled_from([-(2**63), -1, 2**32, 2**63 - 1, 2**64]))


_NODE = """node {{
  name: "{name}"
  op: "{op}"
{inputs}{attrs}}}
"""
_PLACEHOLDER_ATTRS = """  attr {
    key: "dtype"
    value {
      type: DT_FLOAT
    }
  }
"""


@st.composite
def pbtxt_graphs(draw, max_nodes: int = 6) -> str:
    """Well-formed GraphDef text: a Placeholder and a chain of Identity/AddN nodes over it."""
    n = draw(st.integers(1, max_nodes))
    parts = [_NODE.format(name="x", op="Placeholder", inputs="", attrs=_PLACEHOLDER_ATTRS)]
    for i in range(n):
        previous = "x" if i == 0 else f"n{i - 1}"
        op = draw(st.sampled_from(["Identity", "AddN"]))
        inputs = f'  input: "{previous}"\n' * (2 if op == "AddN" else 1)
        parts.append(_NODE.format(name=f"n{i}", op=op, inputs=inputs, attrs=""))
    return "".join(parts)


_PBTXT_NOISE = ['"', "\\", "{", "}", "<", ">", "[", "]", ":", "#", "\n", "\\x", "\\777", "-", "1e40", "DT_FOO", "\x00"]


@st.composite
def mutated_pbtxt(draw) -> str:
    """GraphDef text broken the ways files break: truncated, characters inserted or deleted,
    duplicated nodes, deep nesting."""
    text = draw(pbtxt_graphs())
    kind = draw(st.sampled_from(["truncate", "insert", "delete", "duplicate", "nest", "swap_field"]))
    if kind == "truncate":
        return text[: draw(st.integers(0, max(len(text) - 1, 0)))]
    if kind == "insert":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.sampled_from(_PBTXT_NOISE)) + text[at:]
    if kind == "delete":
        at = draw(st.integers(0, max(len(text) - 1, 0)))
        return text[:at] + text[at + draw(st.integers(1, 8)) :]
    if kind == "duplicate":
        return text + text
    if kind == "nest":
        depth = draw(st.integers(50, 5000))
        return "node " + "{ a " * depth + "}" * depth
    return text.replace("op:", draw(st.sampled_from(["op_type:", "name:", "input:", "op"])), 1)


_JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)


@st.composite
def run_file_documents(draw, as_text: bool = True):
    """Run-file documents (the JSON/YAML shape of ``fbnops run``) with hostile fields: wrong types,
    missing and unknown keys, huge shapes, unknown ops and bad references."""
    shape = draw(st.one_of(st.lists(st.integers(1, 4), min_size=4, max_size=4), hostile_shapes(0, 5).map(list)))
    entry = {
        "name": draw(st.one_of(st.just("bn"), st.just(""), st.integers(), st.none())),
        "op": draw(st.sampled_from(["FusedBatchNormGradV3", "FusedBatchNormV3", "Conv2D", ""])),
        "inputs": {
            "x": draw(st.one_of(st.just({"random": {"shape": shape, "seed": 0}}), _JSON_VALUES)),
            "scale": draw(st.one_of(st.just({"value": [1.0]}), st.just({"value": 1e40}), _JSON_VALUES)),
        },
        "attrs": draw(st.dictionaries(st.sampled_from(["epsilon", "data_format", "bogus"]), _JSON_VALUES, max_size=2)),
    }
    doc = {"ops": draw(st.one_of(st.just([entry]), st.just([entry, entry]), _JSON_VALUES))}
    if draw(st.booleans()):
        doc["fetch"] = draw(st.one_of(st.just(["bn.y"]), st.just(["bn:9"]), _JSON_VALUES))
    if draw(st.booleans()):
        doc[draw(st.text(min_size=1, max_size=6))] = draw(_JSON_VALUES)
    return json.dumps(doc, allow_nan=True) if as_text else doc
