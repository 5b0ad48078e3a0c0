"""Put on PYTHONPATH by the Spark driver processes some tests start (tests/spark/test_exactly_once_sink.py,
test_local_cluster.py): every Python process of that Spark application (the driver's, the executors'
Python workers, the sink's commit runner) imports it at start-up, so kaflite.spark's debug lines, which
say the path each task took, reach the workers' stderr with the file that logged them (which kaflite the
worker imported). Spark copies a Python worker's stderr into its executor's: the driver's own output in
local mode, SPARK_HOME/work/<app>/<executor>/stderr for a standalone worker's executor. The tests read
those lines; nothing in kaflite depends on this file."""

import logging

_handler = logging.StreamHandler()
_handler.setFormatter(logging.Formatter("kaflite-worker %(process)d %(pathname)s: %(message)s"))
_log = logging.getLogger("kaflite.spark")
_log.setLevel(logging.DEBUG)
_log.addHandler(_handler)
