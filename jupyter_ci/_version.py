"""The single source of jupyter-ci's version (package.json must agree: a test checks)."""

__version__ = "0.1.0"
