"""Every op spec is a whole op (TensorFlow's ``api_test.cc`` in spirit).

For each spec in ``fbnops.specs``: an eager body, a graph shape rule, a kernel on every
known backend, a graph OpDef that agrees with the spec, a registered gradient exactly
when ``spec.gradient`` names one (and that gradient builds that op), a ``raw_ops``
function, and a reference page from the docs generator listed in the site's nav.
"""

from __future__ import annotations

import runpy
import sys
import types
from pathlib import Path

import pytest
import spec_examples as examples

import fbnops
from fbnops.errors import NotFoundError
from fbnops.framework import registry
from fbnops.framework.gradients import gradients
from fbnops.framework.graph import Graph
from fbnops.framework.scope import Scope
from fbnops.ops.op_def import SpecOpDef
from fbnops.specs import OpSpec, all_specs
from fbnops.testing import extras

ROOT = Path(__file__).resolve().parent.parent
SPECS = all_specs()
NAMES = [s.name for s in SPECS]


def _graph_inputs(spec: OpSpec, scope: Scope):
    shapes = examples.input_shapes(spec)
    return [scope.placeholder(examples.dtype_of(spec, a.type), shapes[a.name], name=a.name) for a in spec.inputs]


def test_there_are_specs_and_unique_names():
    assert len(SPECS) >= 2 and len(set(NAMES)) == len(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_graph_op_def_binds_the_spec(name):
    spec = next(s for s in SPECS if s.name == name)
    op_def = registry.get_op_def(name)
    assert isinstance(op_def, SpecOpDef) and op_def.spec is spec
    assert op_def.input_names == spec.input_names and op_def.output_names == spec.output_names
    assert set(op_def.attr_kinds) == {a.name for a in spec.attrs} | set(spec.type_attrs)
    assert callable(op_def.body), "no eager body"
    assert callable(op_def.shape), "no shape rule"


@pytest.mark.parametrize("name", NAMES)
def test_shape_rule_gives_every_output_a_shape(name):
    spec = next(s for s in SPECS if s.name == name)
    scope = Scope(Graph())
    op = scope.add_op(name, _graph_inputs(spec, scope), examples.required_attrs(spec))
    assert [o.shape for o in op.outputs] == examples.output_shapes(spec)
    assert [o.dtype for o in op.outputs] == [examples.dtype_of(spec, a.type) for a in spec.outputs]


def _kernel_op(name: str) -> str | None:
    """The op whose backend kernels ``name`` runs on (V1/V2 run on V3's); None when computed in closed form."""
    return getattr(registry.get_op_def(name), "kernel", name)


@pytest.mark.parametrize("backend", registry.known_backends())
@pytest.mark.parametrize("name", [n for n in NAMES if _kernel_op(n)])
def test_a_kernel_on_every_known_backend(name, backend):
    extras.require_backend(backend)
    assert callable(registry.get_kernel(_kernel_op(name), backend))


def test_closed_form_ops_declare_no_kernel():
    """An op without backend kernels says so in its op def (NO_KERNEL), rather than lacking one by accident."""
    closed = sorted(n for n in NAMES if not _kernel_op(n))
    assert closed == ["BatchNormWithGlobalNormalization", "BatchNormWithGlobalNormalizationGrad"]


@pytest.mark.parametrize("name", NAMES)
def test_eager_and_graph_runs_agree(name):
    """The eager body runs through raw_ops and through a Session, to the same bits."""
    spec = next(s for s in SPECS if s.name == name)
    values = examples.inputs(spec, seed=0)
    attrs = examples.required_attrs(spec)
    eager = getattr(fbnops.raw_ops, name)(**values, **attrs)
    assert tuple(type(eager)._fields) == spec.output_names
    scope = Scope(Graph())
    placeholders = _graph_inputs(spec, scope)
    op = scope.add_op(name, placeholders, attrs)
    graph_out = fbnops.Session(scope.graph).run(list(op.outputs), dict(zip(placeholders, values.values(), strict=True)))
    for got, want in zip(graph_out, eager, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("name", NAMES)
def test_registered_gradient_matches_spec_gradient(name):
    spec = next(s for s in SPECS if s.name == name)
    assert registry.has_gradient(name) == (spec.gradient is not None)
    scope = Scope(Graph())
    inputs = _graph_inputs(spec, scope)
    op = scope.add_op(name, inputs, examples.required_attrs(spec))
    if spec.gradient is None:
        with pytest.raises(NotFoundError, match=f"No gradient defined for operation of type '{name}'"):
            gradients(op.output(0), inputs[0])
        return
    before = len(scope.graph)
    gradients(op.output(0), inputs[0])
    added = {o.type for o in scope.graph.operations()[before:]}
    assert spec.gradient in added, f"the gradient of {name} built {sorted(added)}, not {spec.gradient}"


@pytest.fixture(scope="module")
def generated_pages(monkeypatch_module):
    """Run docs/gen_pages.py with a stand-in for mkdocs_gen_files that collects the pages."""
    pages: dict[str, str] = {}

    class _Page:
        def __init__(self, path):
            self.path, self.parts = path, []

        def write(self, text):
            self.parts.append(text)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pages[self.path] = "".join(self.parts)

    fake = types.ModuleType("mkdocs_gen_files")
    fake.open = lambda path, mode="w": _Page(path)
    monkeypatch_module.setitem(sys.modules, "mkdocs_gen_files", fake)
    monkeypatch_module.chdir(ROOT)
    monkeypatch_module.syspath_prepend(str(ROOT))
    runpy.run_path(str(ROOT / "docs" / "gen_pages.py"))
    return pages


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.mark.parametrize("name", NAMES)
def test_docs_page_generated_and_in_the_nav(name, generated_pages):
    page = generated_pages.get(f"ops/{name}.md")
    assert page is not None, f"docs/gen_pages.py wrote no ops/{name}.md"
    assert page.startswith(f"# {name}\n")
    assert f"fbnops.raw_ops.{name}(" in page
    nav = (ROOT / "mkdocs.yml").read_text()
    assert f"ops/{name}.md" in nav, f"mkdocs.yml's nav does not list ops/{name}.md"
