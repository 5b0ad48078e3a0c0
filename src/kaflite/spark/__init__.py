"""kaflite.spark."""
