"""The package version, in a module of its own so the tools can read it without importing the front door."""

__version__ = "0.1.0"
