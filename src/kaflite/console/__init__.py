"""kaflite.console: a web console for any Kafka-compatible cluster, and the assignment lab.

`kaflite console -b HOST:PORT` serves it (Starlette + Jinja2, charts drawn as SVG on the server, no
JavaScript or CDN needed). It talks to the cluster over the wire protocol only (confluent-kafka), so
it works against Apache Kafka too; it binds 127.0.0.1 by default and is read-only unless started with
`--allow-writes`. `kaflite assign --html OUT` writes the lab's report as one self-contained file.

Modules: `cluster` (what is read from the cluster), `wire` (DescribeLogDirs, members' subscriptions), `lag` (lag history,
rates, time to drain), `sampler` (the background sampling thread), `records` (display and export),
`lab` (assignors side by side, key skew), `svg` (charts), `report` (the static lab report), `app`
(the Starlette app).
"""
