package kspark.anchor;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;
import org.apache.kafka.streams.test.TestRecord;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.zip.CRC32;

/**
 * The test-driver benchmark of {@code benchmarks/driver_stream_join.py} in Kafka Streams' own
 * {@link TopologyTestDriver}: {@code impressions.join(clicks, joiner,
 * JoinWindows.ofTimeDifferenceAndGrace(diff, grace), StreamJoined.with(String, JSON, JSON))}
 * (or {@code leftJoin} / {@code outerJoin}) to topic {@code joined} (String key, JSON value).
 * The joiner makes {@code {"imp": impression id, "click": click id, "ad": impression's ad}}, a
 * missing side {@code null}, as {@code join_workload.joiner} does. Left and outer joins look for
 * closed windows after every record (the internal emit interval 0, as kspark does): the driver's
 * mock clock stands still, so with the default of 1 s they would look only once.
 *
 * <p>Usage: {@code DriverStreamJoin <records file> <inner|left|outer> <diff ms> <grace ms> <runs>
 * <rocksdb|in_memory>}: the last, the DSL's store type (Kafka Streams' default is rocksdb). The
 * records file has one record per line, {@code topic<TAB>key<TAB>json value<TAB>timestamp}, in
 * arrival order (the protocol of {@link DriverClickCounter}, with each record's topic first).
 * Each run pipes every record through a fresh driver and prints {@code run <records> <seconds>
 * <records out> <checksum>}; the checksum, over the output records in order, is {@code h = h *
 * 31 + crc32("key|imp|click|timestamp")} modulo 2^64 (unsigned), a missing side "null".
 */
public final class DriverStreamJoin {
    static final String OUTPUT = "joined";

    private DriverStreamJoin() {
    }

    static final ObjectMapper MAPPER = new ObjectMapper();

    static final ValueJoiner<JsonNode, JsonNode, JsonNode> JOINER = (impression, click) -> {
        final ObjectNode out = MAPPER.createObjectNode();
        out.set("imp", impression == null ? NullNode.getInstance() : impression.get("id"));
        out.set("click", click == null ? NullNode.getInstance() : click.get("id"));
        out.set("ad", impression == null ? NullNode.getInstance() : impression.get("ad"));
        return out;
    };

    static Topology topology(final Serde<JsonNode> json, final String kind, final long diff,
                             final long grace) {
        final StreamsBuilder builder = new StreamsBuilder();
        final KStream<String, JsonNode> impressions =
                builder.stream("impressions", Consumed.with(Serdes.String(), json));
        final KStream<String, JsonNode> clicks =
                builder.stream("clicks", Consumed.with(Serdes.String(), json));
        final JoinWindows windows = JoinWindows.ofTimeDifferenceAndGrace(
                Duration.ofMillis(diff), Duration.ofMillis(grace));
        final StreamJoined<String, JsonNode, JsonNode> joined =
                StreamJoined.with(Serdes.String(), json, json);
        final KStream<String, JsonNode> out = switch (kind) {
            case "inner" -> impressions.join(clicks, JOINER, windows, joined);
            case "left" -> impressions.leftJoin(clicks, JOINER, windows, joined);
            case "outer" -> impressions.outerJoin(clicks, JOINER, windows, joined);
            default -> throw new IllegalArgumentException("kind: inner, left or outer, not " + kind);
        };
        out.to(OUTPUT, Produced.with(Serdes.String(), json));
        return builder.build();
    }

    static String text(final JsonNode node) {
        return node == null || node.isNull() ? "null" : node.asText();
    }

    public static void main(final String[] args) throws IOException {
        if (args.length != 6) {
            System.err.println("usage: DriverStreamJoin <records file> <inner|left|outer> "
                    + "<diff ms> <grace ms> <runs> <rocksdb|in_memory>");
            System.exit(2);
        }
        final Serializer<JsonNode> toJson = (topic, node) -> {
            try {
                return node == null ? null : MAPPER.writeValueAsBytes(node);
            } catch (IOException e) {
                throw new IllegalArgumentException(e);
            }
        };
        final Deserializer<JsonNode> fromJson = (topic, bytes) -> {
            try {
                return bytes == null ? null : MAPPER.readTree(bytes);
            } catch (IOException e) {
                throw new IllegalArgumentException(e);
            }
        };
        final Serde<JsonNode> json = Serdes.serdeFrom(toJson, fromJson);
        final List<Boolean> isImpression = new ArrayList<>();
        final List<String> keys = new ArrayList<>();
        final List<JsonNode> values = new ArrayList<>();
        final List<Long> stamps = new ArrayList<>();
        try (BufferedReader in = Files.newBufferedReader(Path.of(args[0]), StandardCharsets.UTF_8)) {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                final String[] parts = line.split("\t", 4);
                if (!parts[0].equals("impressions") && !parts[0].equals("clicks")) {
                    throw new IllegalArgumentException("unknown topic " + parts[0]);
                }
                isImpression.add(parts[0].equals("impressions"));
                keys.add(parts[1]);
                values.add(MAPPER.readTree(parts[2]));
                stamps.add(Long.parseLong(parts[3]));
            }
        }
        final String kind = args[1];
        final long diff = Long.parseLong(args[2]);
        final long grace = Long.parseLong(args[3]);
        final int runs = Integer.parseInt(args[4]);
        final String storeType = args[5];
        for (int run = 0; run < runs; run++) {
            final Properties props = new Properties();
            props.put(StreamsConfig.APPLICATION_ID_CONFIG, "driver-stream-join");
            props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
            props.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG, storeType.equals("in_memory")
                    ? BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class
                    : BuiltInDslStoreSuppliers.RocksDBDslStoreSuppliers.class);
            // look for closed windows of left and outer joins after every record (the driver's
            // mock clock does not move: with the default, 1000 ms, only the first look happens)
            props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX,
                    0L);
            try (TopologyTestDriver driver = new TopologyTestDriver(
                    topology(json, kind, diff, grace), props, Instant.ofEpochMilli(0))) {
                final TestInputTopic<String, JsonNode> impressions = driver.createInputTopic(
                        "impressions", Serdes.String().serializer(), toJson);
                final TestInputTopic<String, JsonNode> clicks = driver.createInputTopic(
                        "clicks", Serdes.String().serializer(), toJson);
                final long t0 = System.nanoTime();
                for (int i = 0; i < keys.size(); i++) {
                    (isImpression.get(i) ? impressions : clicks)
                            .pipeInput(keys.get(i), values.get(i), stamps.get(i));
                }
                final double seconds = (System.nanoTime() - t0) / 1e9;
                final List<TestRecord<String, JsonNode>> out = driver.createOutputTopic(
                        OUTPUT, Serdes.String().deserializer(), fromJson).readRecordsToList();
                long checksum = 0;
                final CRC32 crc = new CRC32();
                for (final TestRecord<String, JsonNode> r : out) {
                    final String line = r.key() + "|" + text(r.value().get("imp")) + "|"
                            + text(r.value().get("click")) + "|" + r.timestamp();
                    crc.reset();
                    crc.update(line.getBytes(StandardCharsets.UTF_8));
                    checksum = checksum * 31 + crc.getValue();
                }
                System.out.printf("run %d %.4f %d %s%n", keys.size(), seconds, out.size(),
                        Long.toUnsignedString(checksum));
                System.out.flush();
            }
        }
    }
}
