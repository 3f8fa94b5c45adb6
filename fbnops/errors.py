"""Public error types (``fbnops.errors.InvalidArgumentError`` etc.)."""

from .framework.errors import (
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
    ResourceExhaustedError,
    UnimplementedError,
)

__all__ = [
    "OpError",
    "InvalidArgumentError",
    "NotFoundError",
    "InternalError",
    "UnimplementedError",
    "ResourceExhaustedError",
]
