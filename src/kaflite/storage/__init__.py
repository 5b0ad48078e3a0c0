"""kaflite.storage."""
