# GENERATED from fbnops/kernels/_plan.py by `python -m fbnops.kernels._plan`: do not edit.
cdef enum:
    LANES = 512
    MAX_W = 1024
    BLOCK_ROWS = 128
    ROW_ITEM_ELEMS = 32768
    MAX_ROW_ITEMS = 64
    PLANE_ITEM_BYTES = 4194304
    MIN_ITEMS = 16
    STREAM_MIN_BYTES = 8388608
