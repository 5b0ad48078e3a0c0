"""kaflite's version, importable from every layer (the `kaflite` package itself re-exports it)."""

__version__ = "0.1.0"
