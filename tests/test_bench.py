"""The benchmark's machinery on tiny shapes: paired rounds, the report, JSON, comparison,
plot, Markdown, peer validation and the oneDNN harness."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from fbnops.testing import extras
from fbnops.tools.bench import report
from fbnops.tools.bench.__main__ import BenchUsageError, _peers, main, measure
from fbnops.tools.bench.cases import Case
from fbnops.tools.bench.peers import PEERS, fbnops_call
from fbnops.tools.bench.timing import Sample, interleaved, paired_ratio, round_orders

TINY = ["--quick", "--peers", "ref", "--shapes", "2,4,4,8;2,3,3,16", "--layouts", "NHWC,NCHW"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "new.json"
    assert main([*TINY, "--json", str(path)]) == 0
    return json.loads(path.read_text())


def test_interleaved_rounds_time_the_second_call_of_each_pair():
    counts = {"a": 0, "b": 0}

    def call(name):
        def run():
            counts[name] += 1

        return run

    samples = interleaved({"a": call("a"), "b": call("b")}, rounds=4)
    assert counts == {"a": 9, "b": 9}  # warm-up + 2 per round
    assert all(len(s.times) == 4 for s in samples.values())


def test_the_fbnops_column_is_a_plain_raw_ops_call_and_backends_are_timed_in_blocks(monkeypatch):
    """The fbnops column calls raw_ops as a user does (no backend block, as the frameworks' calls
    have none); a backend timed against another runs in a block, and so does its Cython twin."""
    from fbnops.framework import registry

    case = Case((2, 4, 4, 8), "NHWC", "float32", "grad")
    case.make()
    entered = []
    real = registry.backend
    monkeypatch.setattr(registry, "backend", lambda name: entered.append(name) or real(name))
    assert registry.get_backend() == "cython"
    expected = fbnops_call(case)()
    assert entered == []
    in_block = fbnops_call(case, block=True)()
    assert all(np.array_equal(g, e) for g, e in zip(in_block[:3], expected[:3], strict=True))
    reference = fbnops_call(case, "reference")()
    assert all(np.allclose(g, e, rtol=1e-5, atol=1e-6) for g, e in zip(reference[:3], expected[:3], strict=True))
    assert entered == ["cython", "reference"]


def test_round_orders_vary_each_calls_predecessor_and_repeat_from_run_to_run():
    names = ["fbnops", "torch", "onednn", "floor", "floor_nt", "read"]
    orders = round_orders(names, 15)
    assert all(sorted(order) == sorted(names) for order in orders)  # every call once a round
    assert orders == round_orders(names, 15)  # seeded: the same rounds in every run
    before = {k: set() for k in names}  # what ran just before each call (within a round, and across)
    sequence = [k for order in orders for k in order]
    for previous, k in zip(sequence[:-1], sequence[1:], strict=True):
        before[k].add(previous)
    # A rotation of one order gives each call a single predecessor (the one before it in the order).
    assert all(len(before[k] - {k}) >= 3 for k in names), before


def test_paired_ratio_is_the_median_of_per_round_ratios():
    a, b = Sample((1.0, 2.0, 4.0)), Sample((2.0, 2.0, 2.0))
    assert paired_ratio(a, b) == (1.0, pytest.approx(0.375))  # ratios 0.5, 1, 2: quartiles 0.75, 1.5; half the IQR
    assert Sample((1.0, 1.0, 1.0)).spread == 0.0


def test_report_json_has_machine_rows_paired_ratios_and_floor(tiny_run, capsys):
    doc = tiny_run
    machine = doc["machine"]
    assert machine["cpu"] and machine["threads"] >= 1 and "numpy" in machine["versions"]
    assert doc["peers"] == ["ref"] and doc["rounds"] == 3
    assert len(doc["rows"]) == 4
    for row in doc["rows"]:
        assert row["fbnops_ms"] > 0 and row["ref_ms"] > 0 and row["floor_ms"] > 0
        assert row["ratio_ref"] > 0 and row["ratio_floor"] > 0 and row["fbnops_spread"] >= 0
        assert row["key"].startswith("grad/") and row["dtype"] == "float32"


def test_gradient_rows_add_the_read_pass_to_the_floor_and_forwards_do_not(tiny_run):
    """A gradient reads x and dy for its sums before the pass that the floor stands for: its rows
    also time that read, and the 2-pass floor (the read plus the floor, round by round) is above it."""
    for row in tiny_run["rows"]:
        assert row["two_pass_ms"] > row["floor_ms"] > 0 and 0 < row["read_ms"] < row["two_pass_ms"]
        assert 0 < row["ratio_two_pass"] < row["ratio_floor"] and row["ratio_two_pass_spread"] >= 0
    case = Case((2, 4, 4, 8), "NHWC", "float32", "forward")
    case.make()
    row = measure(case, ["ref"], 3, 1)
    assert row["ratio_floor"] > 0 and not {"ratio_two_pass", "two_pass_ms", "read_ms"} & set(row)


def test_printed_report_names_machine_units_and_only_the_chosen_peers(tmp_path, capsys):
    assert main([*TINY, "--shapes", "2,4,4,8", "--layouts", "NHWC"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("# CPU: ") and "caches" in lines[0] and "threads used" in lines[1]
    assert "# peers: ref;" in out and "torch" not in out.split("\n\n")[0]
    header = next(line for line in lines if line.startswith("case"))
    columns = ("fbnops [ms]", "ref [ms]", "fbnops/ref", "floor [ms]", "fbnops/floor", "fbnops/2-pass", "fbnops [GB/s]")
    for column in columns:
        assert column in header
    assert err == ""  # no progress bar off a terminal


def test_compare_flags_regressions_beyond_threshold_and_noise(tiny_run, tmp_path, capsys):
    rows = [{**r, "fbnops_spread": 0.0} for r in tiny_run["rows"]]

    def scaled(factor, spread=0.0):
        return {
            **tiny_run,
            "rows": [{**r, "fbnops_ms": r["fbnops_ms"] * factor, "fbnops_spread": spread} for r in rows],
        }

    lines, regressions = report.compare(rows, scaled(1 / 3), 0.10)
    assert regressions == 4 and sum("REGRESSION" in line for line in lines) == 4
    assert report.compare(rows, scaled(1 / 1.05), 0.10)[1] == 0  # within the threshold
    assert report.compare(rows, scaled(1 / 3, spread=2.5), 0.10)[1] == 0  # within the noise
    lines, regressions = report.compare(rows, scaled(3), 0.10)
    assert regressions == 0 and sum("faster" in line for line in lines) == 4
    other = {**scaled(1), "machine": {**tiny_run["machine"], "cpu": "another CPU"}}
    assert any("not comparable" in line for line in report.compare(rows, other, 0.10, tiny_run["machine"])[0])
    old = tmp_path / "old.json"
    old.write_text(json.dumps(scaled(1 / 100)))
    assert main([*TINY, "--compare", str(old)]) == 1  # the command: exit 1 when a case regressed
    assert "REGRESSION" in capsys.readouterr().out


def test_markdown_ratio_columns_have_distinct_headers(tiny_run):
    md = report.markdown(tiny_run)
    assert len({line.count("|") for line in md.split("\n\n")[0].splitlines()}) == 1  # every row as wide
    header = md.splitlines()[0].strip("| ").split(" | ")
    assert len(header) == len(set(header))
    assert "fbnops / ref" in header and "fbnops / floor" in header and "ratio" not in header
    assert "fbnops / 2-pass" in header and "2-pass: a read of both" in md
    assert md.count("\n| `grad") == 4 and "CPU:" in md
    older = {**tiny_run, "rows": [{k: v for k, v in r.items() if "two_pass" not in k} for r in tiny_run["rows"]]}
    md = report.markdown(older)  # a report from before the 2-pass floor: no such column, nor its words
    assert "2-pass" not in md and len({line.count("|") for line in md.split("\n\n")[0].splitlines()}) == 1


def test_plot_is_written(tiny_run, tmp_path):
    extras.require("matplotlib", "bench")
    path = tmp_path / "perf.png"
    report.plot(tiny_run, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_peers_are_validated_up_front(monkeypatch):
    assert set(_peers("auto")) <= set(PEERS) and "ref" in _peers("auto")
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
    assert "torch" not in _peers("auto")
    with pytest.raises(BenchUsageError, match="peer 'torch' cannot run: torch is not installed"):
        _peers("ref,torch")
    with pytest.raises(BenchUsageError, match=r"unknown peer\(s\) \['bogus'\]"):
        _peers("ref,bogus")


def test_onednn_harness_times_plain_and_blocked_primitives():
    reason = PEERS["onednn"].missing()
    if reason:  # the missing wheels are the onednn extra's; a missing compiler or checkout says so itself
        pytest.skip(extras.reason("onednn") if "pip install" in reason else f"oneDNN peer unavailable: {reason}")
    from fbnops.tools.bench import onednn

    assert onednn.version().count(".") == 2
    for op in ("grad", "forward"):
        case = Case((2, 4, 4, 16), "NCHW", "float32", op)
        case.make()  # the peer runs on the case's own inputs
        for blocked in (False, True):
            call = onednn.onednn_call(case, blocked, threads=1)
            samples = interleaved({"onednn": call}, rounds=2)
            assert samples["onednn"].median > 0
    assert onednn.onednn_call(Case((2, 4, 4, 16), "NHWC", "bfloat16", "grad"), False) is None


def test_the_compute_bound_counts_and_limits():
    from fbnops.tools.bench import bound

    nhwc, nchw = bound.pass_costs("NHWC", "float32"), bound.pass_costs("NCHW", "float32")
    # reduce: 5 loads (x, dy, centre, 2 accumulators) and 2 stores per 8 lanes: 2.5 cycles on 2 load ports
    assert nhwc["reduce"] == bound.PassCost(load=5, store=2, fp=3)
    assert nhwc["reduce"].cycles_per_element() == pytest.approx(2.5 / 8)
    # apply: channels-last loads 4 per-lane tiles besides x and dy (load-bound); planes keep scalars
    assert nhwc["apply"].cycles_per_element() == pytest.approx(3 / 8)
    assert nchw["apply"].cycles_per_element() == pytest.approx(2 / 8)  # 4 FP ops on 2 ports
    # unrolling rows divides the accumulator traffic; float16 adds conversions on the FP ports
    assert bound.pass_costs("NHWC", "float32", rows_unrolled=4)["reduce"].store == 0.5
    assert bound.pass_costs("NHWC", "float16")["apply"].fp > nhwc["apply"].fp


def test_the_compute_bound_sizes_fill_up_to_half_of_l2():
    from fbnops.tools.bench import bound

    block = bound.FIT_C * bound.FIT_PLANE
    assert bound.sizes_in_l2(block, 512 << 10) == [block, 2 * block, 3 * block]  # (as before: 451 KB)
    sizes = bound.sizes_in_l2(block, 2 << 20)
    assert len(sizes) == bound.MAX_SIZES and sizes[0] == block and all(n % block == 0 for n in sizes)
    assert 3 * 4 * sizes[-1] <= (2 << 20) // 2 < 3 * 4 * (sizes[-1] + block)
    assert bound.l2_bytes() > 0


def test_the_compute_bound_measures_slopes_on_one_thread():
    from fbnops.tools.bench import bound

    measured = bound.measure("NHWC", "float32", repeats=3)
    assert set(measured) == {"reduce", "apply", "gradient"}
    assert all(np.isfinite(fit.ns) and np.isfinite(fit.fixed_ns) and fit.r2 <= 1 for fit in measured.values())
    # a fit is marked unreliable, not printed as a ratio, when the line does not explain the times
    assert bound.Slope(0.2, 1000.0, 0.99).reliable
    assert not bound.Slope(-0.7, 44000.0, 0.99).reliable and not bound.Slope(0.2, 1000.0, 0.5).reliable
    ghz, source = bound.case_clock_ghz()  # the clock the bound divides by, and where it came from
    assert source in ("measured", "/proc/cpuinfo", "assumed") and 0.3 < ghz < 8


def test_tiny_calls_are_timed_against_the_peers_in_alternating_runs():
    from fbnops.tools.bench.timing import tiny_call_costs

    costs = tiny_call_costs((), repeats=2, calls=20)
    assert set(costs) == {"grad", "forward"}
    assert all(c["fbnops_us"] > 0 and not any(k.startswith("ratio_") for k in c) for c in costs.values())
    lines = report.tiny_lines({"grad": {"fbnops_us": 10.0, "torch_us": 12.5, "ratio_torch": 0.8}})
    assert lines == [
        "# tiny (2,4,4,8) grad call: fbnops raw_ops 10.0 us, torch 12.5 us, fbnops/torch 0.80 "
        "(medians of alternating runs of 1000 calls)"
    ]


def test_five_d_layouts_split_h_and_reduce_over_every_axis_but_c():
    for layout, dims in (("NDHWC", (2, 2, 2, 4, 8)), ("NCDHW", (2, 8, 2, 2, 4))):
        case = Case((2, 4, 4, 8), layout, "float32", "grad")
        assert case.dims == dims and case.channels_last == (layout == "NDHWC")
        case.make()
        x = case.data["x"]
        axes = tuple(a for a in range(5) if a != (4 if case.channels_last else 1))
        np.testing.assert_allclose(case.data["mean"], x.mean(axis=axes), rtol=1e-6)
    assert Case((2, 5, 4, 8), "NDHWC", "float32", "grad").dims == (2, 1, 5, 4, 8)  # odd H: D = 1
