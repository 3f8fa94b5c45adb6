"""The real engines: MPI under mpiexec (1, 2, 3 processes) and torch.distributed's gloo."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from dist_helpers import MPI_CASES, PER_CHANNEL, ROWS, case_batch, differing_bits, single_process

from fbnops.distributed.demo import find_mpiexec, run_mpiexec
from fbnops.testing import extras

HERE = Path(__file__).parent
LAYOUTS = {1: [7], 2: [4, 3], 3: [3, 0, 4]}


def _load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        out = {k: z[k] for k in z.files}
    for k, v in out.items():  # bfloat16/float16 rows come back as float16/void: keep the bits comparable
        if v.dtype.kind == "V":
            out[k] = v.view(ml_dtypes.bfloat16)
    return out


@pytest.mark.skipif(find_mpiexec() is None or not extras.have("mpi4py"), reason=extras.reason("mpi"))
def test_mpiexec_one_two_three_ranks_agree(tmp_path):
    runs = {}
    for p, sizes in LAYOUTS.items():
        out = tmp_path / f"p{p}.npz"
        cmd = [find_mpiexec(), "-n", str(p), sys.executable, "-m", "mpi4py", str(HERE / "mpi_worker.py"), str(out),
               ",".join(map(str, sizes))]  # fmt: skip
        run = run_mpiexec(cmd, 120)
        assert run.returncode == 0, run.stderr[-2000:]
        runs[p] = _load(out)
    for p, run in runs.items():  # one bad rank: the same typed error on every rank, naming it
        messages = set(run.pop("error/messages").tolist())
        where = f"failed on rank {p - 1}: " if p > 1 else ""  # one rank: the plain op's own error
        assert len(messages) == 1 and f"{where}input must be 4 or 5-dimensional" in messages.pop()
    names = {k.rsplit("/", 1)[0] for k in runs[1]}
    for case in sorted(names):
        layout, mode = case.split("/")
        want = single_process(case_batch(7, **MPI_CASES[layout]), data_format=MPI_CASES[layout]["data_format"])
        for p, run in runs.items():
            got = {k: run[f"{case}/{k}"] for k in PER_CHANNEL + ROWS}
            assert run[f"{case}/same_on_all_ranks"], (case, p)
            for k in PER_CHANNEL:
                np.testing.assert_allclose(got[k], want[k], rtol=2e-6, atol=1e-6, err_msg=f"{case} p={p} {k}")
            if mode == "reproducible":  # any number of ranks: the same bits
                assert not differing_bits(got, {k: runs[1][f"{case}/{k}"] for k in got}), (case, p)
            elif mode == "reduce_scatter":  # the same additions in the same order as the Allgather path
                assert not differing_bits(got, {k: run[f"{layout}/default/{k}"] for k in got}), (case, p)
            elif p == 1:  # one rank is the single-process op
                assert not differing_bits(got, want), case


@pytest.mark.skipif(not extras.have("mpi4py") or find_mpiexec() is None, reason=extras.reason("mpi"))
def test_a_failure_at_any_stage_on_one_mpi_rank_reaches_every_rank(tmp_path):
    """Rank 1 of 3 raises inside each stage in turn: all three raise the same typed error, none hangs."""
    import json

    from failures import STAGES, check_outcomes

    out = tmp_path / "failures.json"
    cmd = [
        find_mpiexec(),
        "-n",
        "3",
        sys.executable,
        "-m",
        "mpi4py",
        str(HERE / "mpi_fail_worker.py"),
        str(out),
        "3,2,2",
    ]
    run = run_mpiexec(cmd, 120)  # a rank left waiting would time out here (and every rank is killed)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(out.read_text())
    assert sorted(report) == sorted(f"{m}/{s}" for m in ("default", "reproducible", "reduce_scatter") for s in STAGES)
    for case, outcomes in report.items():
        assert len(outcomes) == 3, case
        check_outcomes(outcomes, case.split("/")[1], 1)


def test_demo_without_mpi_is_one_clean_line_and_exit_2(monkeypatch, capsys):
    from fbnops.distributed import demo

    monkeypatch.setattr(demo, "find_mpiexec", lambda: None)
    assert demo.main(3) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'fbnops[mpi]'" in err[0], err
    assert demo.main(0) == 2


@pytest.mark.skipif(find_mpiexec() is None or not extras.have("mpi4py"), reason=extras.reason("mpi"))
def test_demo_on_two_ranks_agrees_with_the_single_process_op(capsys):
    from fbnops.distributed import demo

    assert demo.main(2) == 0
    out = capsys.readouterr().out
    assert "OK: every rank agrees" in out and "bitwise equal to the same call on one rank: yes" in out, out


MISMATCH = """
import numpy as np
from mpi4py import MPI
from fbnops import distributed as fd
from fbnops.errors import InvalidArgumentError
comm = fd.from_mpi4py(MPI.COMM_WORLD)
c = 4 if comm.rank == 0 else 5
x = np.ones((2, 3, 3, c), np.float32)
s, e = np.ones(c, np.float32), np.zeros(0, np.float32)
try:
    fd.FusedBatchNormV3(comm, x=x, scale=s, offset=s, mean=e, variance=e)
except InvalidArgumentError:
    print("rank", comm.rank, "raised InvalidArgumentError", flush=True)
else:
    print("rank", comm.rank, "computed a result", flush=True)
"""


@pytest.mark.skipif(find_mpiexec() is None or not extras.have("mpi4py"), reason=extras.reason("mpi"))
def test_a_channel_count_mismatch_under_mpi_never_computes_and_never_hangs():
    cmd = [find_mpiexec(), "-n", "2", sys.executable, "-m", "mpi4py", "-c", MISMATCH]
    run = run_mpiexec(cmd, 60)  # a hang fails here (and kills every rank)
    # Messages of different lengths: a rank raises InvalidArgumentError, unless MPICH, which treats the
    # truncated message as fatal, ends the job first. Either way no rank computes with mixed statistics.
    # MPICH's fatal error exits with its error code, whose low 7 bits are the error class (142: class
    # 14, MPI_ERR_TRUNCATE); the job's teardown can lose the message itself (seen once in CI).
    from mpi4py import MPI

    assert "computed a result" not in run.stdout, run.stdout
    raised = [f"rank {rank} raised InvalidArgumentError" in run.stdout for rank in (0, 1)]
    truncated = "truncated" in run.stderr or run.returncode & 0x7F == MPI.ERR_TRUNCATE
    assert all(raised) or (run.returncode != 0 and truncated), (run.returncode, run.stdout, run.stderr[-1000:])


def test_a_timeout_kills_every_process_of_the_job(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    cmd = ["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"]  # like mpiexec and its ranks
    with pytest.raises(subprocess.TimeoutExpired):
        run_mpiexec(cmd, 1.0)
    pid = int(pid_file.read_text())
    for _ in range(50):  # SIGKILL is asynchronous; an unreaped zombie is dead too
        try:
            state = Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
        except (FileNotFoundError, IndexError):
            state = "gone"
        if state in ("gone", "Z", "X"):
            break
        time.sleep(0.05)
    assert state in ("gone", "Z", "X"), f"the job's child {pid} survived the timeout ({state})"
