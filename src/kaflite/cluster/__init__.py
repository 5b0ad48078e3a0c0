"""kaflite.cluster."""
