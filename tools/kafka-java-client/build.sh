#!/usr/bin/env bash
# Build Apache Kafka's Java client (kafka-clients-<version>.jar) from a Kafka source checkout with javac
# alone: no Gradle, no Maven Central. See README.md beside this file.
#
# usage: build.sh KAFKA_SRC [OUT]
#   KAFKA_SRC  a Kafka source tree (e.g. `git --git-dir=<fetched repo> archive 3.8.0 | tar -x -C KAFKA_SRC`)
#   OUT        build directory (default /tmp/kafka-build); the result is OUT/libs/*.jar, laid out as a
#              Kafka release's libs/ so OUT can be KAFKA_PATH for librdkafka's tests/java
#
# Jar locations (override through the environment):
#   M2              local Maven repository with jackson, jose4j, zstd-jni, slf4j
#                   (default /root/.m2/repository)
#   PYSPARK_JARS    pyspark's jars/ (lz4-java, snappy-java)
#   ARGPARSE4J_JAR  argparse4j for the message generator (Debian libargparse4j-java)
#   PROTOBUF_JAR    protobuf-java 3.x (Debian libprotobuf-java); protoc from Debian protobuf-compiler
#   OTEL_PROTO_SRC  opentelemetry-proto's .proto tree at v1.0.0 (the Java artifact Kafka 3.8 uses,
#                   1.0.0-alpha, is generated from it): a directory holding opentelemetry/proto/...
#   KAFKA_VERSION   written to kafka/kafka-version.properties (default: gradle.properties' version)
#   KAFKA_COMMIT    commitId written there too (default: KAFKA_SRC's git HEAD, else "unknown")
set -euo pipefail

SRC=$(cd "${1:?usage: build.sh KAFKA_SRC [OUT]}" && pwd)
OUT=${2:-/tmp/kafka-build}
M2=${M2:-/root/.m2/repository}
PYSPARK_JARS=${PYSPARK_JARS:-/work/main/.venv/lib/python3.11/site-packages/pyspark/jars}
ARGPARSE4J_JAR=${ARGPARSE4J_JAR:-/usr/share/java/argparse4j.jar}
PROTOBUF_JAR=${PROTOBUF_JAR:-/usr/share/java/protobuf.jar}
OTEL_PROTO_SRC=${OTEL_PROTO_SRC:?set OTEL_PROTO_SRC to opentelemetry-proto v1.0.0 (see README.md)}
JACKSON=${JACKSON:-2.17.2}
# javac on a shared 2-core machine: one process, bounded heap.
JAVAC=(javac -J-Xmx2g -nowarn -encoding UTF-8)

version=${KAFKA_VERSION:-$(sed -n 's/^version=//p' "$SRC/gradle.properties" 2>/dev/null || true)}
version=${version:-unknown}

jk=$M2/com/fasterxml/jackson
jackson_cp=$jk/core/jackson-databind/$JACKSON/jackson-databind-$JACKSON.jar
jackson_cp+=:$jk/core/jackson-core/$JACKSON/jackson-core-$JACKSON.jar
jackson_cp+=:$jk/core/jackson-annotations/$JACKSON/jackson-annotations-$JACKSON.jar
jackson_cp+=:$jk/datatype/jackson-datatype-jdk8/$JACKSON/jackson-datatype-jdk8-$JACKSON.jar

# What clients needs at run time (build.gradle's `implementation` deps), copied into OUT/libs.
runtime_jars=(
  "$(ls "$M2"/com/github/luben/zstd-jni/1.5.6-3/zstd-jni-1.5.6-3.jar)"
  "$(ls "$PYSPARK_JARS"/lz4-java-*.jar | head -1)"
  "$(ls "$PYSPARK_JARS"/snappy-java-*.jar | head -1)"
  "$M2/org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar"
  "$M2/org/slf4j/slf4j-simple/1.7.36/slf4j-simple-1.7.36.jar"
)
# Only for compiling (build.gradle's compileOnly: SASL/OAUTHBEARER).
compile_only=$jackson_cp:$M2/org/bitbucket/b_c/jose4j/0.9.6/jose4j-0.9.6.jar

# Only what this script makes is removed (OUT may hold other things, e.g. the .proto tree).
rm -rf "$OUT"/{libs,generator-classes,generated,otel-java,otel-classes,clients-classes}
mkdir -p "$OUT"/{libs,generator-classes,generated,otel-java,otel-classes,clients-classes/kafka}

echo "1/5 message generator"
"${JAVAC[@]}" -d "$OUT/generator-classes" -cp "$jackson_cp:$ARGPARSE4J_JAR" \
  $(find "$SRC/generator/src/main/java" -name '*.java')

echo "2/5 generated message classes (as clients' processMessages task)"
java -Xmx1g -cp "$OUT/generator-classes:$jackson_cp:$ARGPARSE4J_JAR" \
  org.apache.kafka.message.MessageGenerator \
  -p org.apache.kafka.common.message -o "$OUT/generated/org/apache/kafka/common/message" \
  -i "$SRC/clients/src/main/resources/common/message" \
  -t ApiMessageTypeGenerator -m MessageDataGenerator JsonConverterGenerator

echo "3/5 opentelemetry-proto (client telemetry, KIP-714)"
protoc -I "$OTEL_PROTO_SRC" --java_out="$OUT/otel-java" \
  "$OTEL_PROTO_SRC"/opentelemetry/proto/{common,resource,metrics}/v1/*.proto
"${JAVAC[@]}" -d "$OUT/otel-classes" -cp "$PROTOBUF_JAR" $(find "$OUT/otel-java" -name '*.java')
jar cf "$OUT/libs/opentelemetry-proto-1.0.0.jar" -C "$OUT/otel-classes" .
cp -L "$PROTOBUF_JAR" "$OUT/libs/protobuf-java.jar"
cp "${runtime_jars[@]}" "$OUT/libs/"

echo "4/5 clients"
find "$SRC/clients/src/main/java" "$OUT/generated" -name '*.java' > "$OUT/clients-sources.txt"
cp_all=$(printf '%s:' "$OUT"/libs/*.jar)$compile_only
"${JAVAC[@]}" --release 11 -d "$OUT/clients-classes" -cp "$cp_all" @"$OUT/clients-sources.txt"

echo "5/5 jar"
commit=${KAFKA_COMMIT:-$(git -C "$SRC" rev-parse --short=16 HEAD 2>/dev/null || echo unknown)}
printf 'commitId=%s\nversion=%s\n' "$commit" "$version" \
  > "$OUT/clients-classes/kafka/kafka-version.properties"
jar cf "$OUT/libs/kafka-clients-$version.jar" -C "$OUT/clients-classes" . \
  -C "$SRC/clients/src/main/resources" .
ls -l "$OUT/libs"
