"""kaflite.clients."""
