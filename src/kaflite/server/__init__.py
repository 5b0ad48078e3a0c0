"""kaflite.server."""
