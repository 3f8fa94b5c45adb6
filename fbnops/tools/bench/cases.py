"""The benchmark's cases: op x dtype x shape x layout, and their input data."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...framework import dtypes

SHAPES = [(32, 56, 56, 64), (32, 28, 28, 128), (32, 14, 14, 256), (32, 7, 7, 512), (16, 112, 112, 64)]
LAYOUTS = ("NHWC", "NCHW")  # the default; the 5-D layouts split H into D=2 planes (same bytes, same channels)
ALL_LAYOUTS = (*LAYOUTS, "NDHWC", "NCDHW")
OPS = ("grad", "forward")
DTYPES = ("float32", "bfloat16", "float16")
EPS = 1e-4


@dataclass
class Case:
    shape: tuple[int, int, int, int]  # (N, H, W, C), whatever the layout
    layout: str  # NHWC | NCHW
    dtype: str  # float32 | bfloat16 | float16
    op: str  # grad | forward
    data: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.op:7s} {str(self.shape):18s} {self.layout} {self.dtype:8s}"

    @property
    def key(self) -> str:
        """A stable identifier for comparing runs: ``grad/32x56x56x64/NHWC/float32``."""
        return f"{self.op}/{'x'.join(map(str, self.shape))}/{self.layout}/{self.dtype}"

    @property
    def dims(self) -> tuple[int, ...]:
        """The tensor's shape in its layout; NDHWC/NCDHW have D = 2 when H is even (else 1)."""
        n, h, w, c = self.shape
        d = 2 if h % 2 == 0 else 1
        return {
            "NHWC": (n, h, w, c),
            "NCHW": (n, c, h, w),
            "NDHWC": (n, d, h // d, w, c),
            "NCDHW": (n, c, d, h // d, w),
        }[self.layout]

    @property
    def channels_last(self) -> bool:
        return self.layout.endswith("C")

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * dtypes.from_user_name(self.dtype).itemsize

    def make(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        dt = dtypes.from_user_name(self.dtype)
        x = rng.standard_normal(self.dims, dtype=np.float32)
        ndim = len(self.dims)
        axes = tuple(a for a in range(ndim) if a != (ndim - 1 if self.channels_last else 1))
        c = self.shape[3]
        self.data = dict(
            x=x.astype(dt),
            dy=rng.standard_normal(self.dims, dtype=np.float32).astype(dt),
            scale=(rng.random(c) + 0.5).astype(np.float32),
            offset=rng.standard_normal(c).astype(np.float32),
            mean=x.mean(axis=axes).astype(np.float32),
            var=x.var(axis=axes).astype(np.float32),
        )


def parse_shapes(text: str) -> list[tuple[int, int, int, int]]:
    """``"2,4,4,8;32,7,7,512"`` -> shapes (N, H, W, C); ValueError naming the bad one."""
    shapes = []
    for part in filter(None, text.split(";")):
        try:
            shape = tuple(int(d) for d in part.split(","))
        except ValueError:
            raise ValueError(f"shape {part!r} is not 4 comma-separated integers N,H,W,C") from None
        if len(shape) != 4 or min(shape) < 1 or np.prod(shape, dtype=object) > 1 << 28:
            raise ValueError(f"shape {part!r} must be 4 positive sizes N,H,W,C with at most 2**28 elements")
        shapes.append(shape)
    if not shapes:
        raise ValueError("no shapes given")
    return shapes


def make_cases(ops, dtypes_, shapes, layouts=LAYOUTS) -> list[Case]:
    return [Case(s, layout, dt, op) for op in ops for dt in dtypes_ for s in shapes for layout in layouts]
