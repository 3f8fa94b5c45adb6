"""``tensorflow::ops``: the generated op classes plus ``Placeholder`` and ``Const``."""

from .ops_gen import *  # noqa: F403
from .ops_gen import __all__ as _gen_all
from .ops_support import Const, Placeholder

__all__ = [*_gen_all, "Placeholder", "Const"]
