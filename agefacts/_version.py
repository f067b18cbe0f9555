"""The package version, in a module of its own so that every stage can read it without
importing the package's public surface (which imports the stages)."""

__version__ = "0.4.0"
