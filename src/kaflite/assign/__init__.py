"""kaflite.assign."""
