#!/bin/sh
# Regenerate tests/data/kafka-harness-cases.json from YOUR apache/kafka checkout (see README.md).
#   KAFKA_SRC=~/src/kafka tools/assign-harness/run.sh [seed] [scenarios-per-assignor]
# Nothing of Kafka is copied into this repository: classes are compiled into a temporary directory.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
: "${KAFKA_SRC:?set KAFKA_SRC to an apache/kafka checkout (3.5+ or trunk)}"
SEED=${1:-15}
PER=${2:-180}
JARS=${HARNESS_JARS:-/usr/share/java}
CP="$JARS/slf4j-api.jar:$JARS/jackson-databind.jar:$JARS/jackson-core.jar:$JARS/jackson-annotations.jar"
RUNTIME_CP="$CP:$JARS/slf4j-nop.jar"
COMMIT=${KAFKA_COMMIT:-$(git -C "$KAFKA_SRC" rev-parse HEAD 2>/dev/null || echo unknown)}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# -sourcepath: javac compiles only the Kafka classes the driver reaches; stubs/ (first) stands in for the
# few of them that need message classes Kafka generates at build time.
SP="$HERE/stubs:$KAFKA_SRC/clients/src/main/java:$KAFKA_SRC/group-coordinator/src/main/java"
SP="$SP:$KAFKA_SRC/group-coordinator/group-coordinator-api/src/main/java:$KAFKA_SRC/server-common/src/main/java"
mkdir "$WORK/classes"
javac -nowarn -d "$WORK/classes" -cp "$CP" -sourcepath "$SP" "$HERE/AssignHarness.java"
python3 "$HERE/gen_cases.py" --seed "$SEED" --per-assignor "$PER" --out "$WORK/scenarios.json"
java -cp "$WORK/classes:$RUNTIME_CP" AssignHarness "$WORK/scenarios.json" "$WORK/out.json"
python3 "$HERE/collect.py" "$WORK/out.json" --kafka-commit "$COMMIT" --out "$REPO/tests/data/kafka-harness-cases.json"
