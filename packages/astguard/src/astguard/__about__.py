"""Version of the ``astguard`` distribution (single source, read by hatchling)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
