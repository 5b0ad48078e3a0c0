"""kaflite.coordinator."""
