"""kaflite.cli."""
