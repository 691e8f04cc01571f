#!/usr/bin/env bash
# The environments of the peers that benchmarks/peers.py runs beside kspark, each a virtual
# environment of its own (their pins clash with pyspark's; they are never kspark's
# dependencies): Apache Flink (PyFlink) with its Kafka SQL connector, and Quix Streams.
#
#   benchmarks/peers/setup.sh [DIR]     # default: $KSPARK_CACHE_DIR/peers, else ~/.cache/kspark/peers
#
# Needs Python 3.11 (PYTHON=...), Java 17, PyPI and Maven Central.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-${KSPARK_CACHE_DIR:-$HOME/.cache/kspark}/peers}"
python="${PYTHON:-python3.11}"
connector="5.0.0-2.2"  # org.apache.flink:flink-sql-connector-kafka for Flink 2.x
mkdir -p "$dest/jars"
for peer in flink quix; do
  if [ ! -x "$dest/$peer/bin/python" ]; then
    "$python" -m venv "$dest/$peer"
  fi
  "$dest/$peer/bin/python" -m pip install --quiet --upgrade pip
  "$dest/$peer/bin/python" -m pip install --quiet -r "$here/requirements-$peer.txt"
done
jar="$dest/jars/flink-sql-connector-kafka-$connector.jar"
if [ ! -s "$jar" ]; then
  curl -sSfL -o "$jar.part" "https://repo.maven.apache.org/maven2/org/apache/flink/flink-sql-connector-kafka/$connector/flink-sql-connector-kafka-$connector.jar"
  mv "$jar.part" "$jar"
fi
echo "peers ready in $dest: flink/bin/python, quix/bin/python, jars/$(basename "$jar")"
