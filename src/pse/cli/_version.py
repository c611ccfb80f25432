"""PSE's installed version, without loading the command line (what `pse --version` prints)."""

from __future__ import annotations

__all__ = ["package_version"]


def package_version() -> str:
    """The installed version of PSE (`0+unknown` when run from sources that were never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pse")
    except PackageNotFoundError:
        return "0+unknown"
