package kspark.anchor;

import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.SessionStore;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Properties;

/**
 * The test-driver benchmark of {@code benchmarks/driver_session_count.py} in Kafka Streams' own
 * {@link TopologyTestDriver}: a DSL session-window count per key (store {@code session-counts},
 * caching on, as the DSL's default) from topic {@code clicks} (String key, Long value) to topic
 * {@code sessions} (session-windowed String key, Long count), emit on update or on window close.
 * The driver processes and commits after every record, as kspark's driver does.
 *
 * <p>Usage: {@code DriverSessionCount <events file> <gap ms> <grace ms> <update|close> <runs>
 * <rocksdb|in_memory>}: the last, the DSL's store type ({@code default.dsl.store}; Kafka Streams'
 * default is rocksdb). The events file has one event per line, {@code key<TAB>value<TAB>timestamp},
 * in arrival order.
 * Each run pipes every event through a fresh driver and prints one line: {@code run <emit>
 * <records> <seconds> <records out> <sessions stored at end> <dropped>}.
 */
public final class DriverSessionCount {
    private static final String STORE = "session-counts";

    private DriverSessionCount() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 6) {
            System.err.println("usage: DriverSessionCount <events file> <gap ms> <grace ms> "
                    + "<update|close> <runs> <rocksdb|in_memory>");
            System.exit(2);
        }
        int n = countLines(Path.of(args[0]));
        String[] keys = new String[n];
        long[] values = new long[n];
        long[] stamps = new long[n];
        read(Path.of(args[0]), keys, values, stamps);
        long gap = Long.parseLong(args[1]);
        long grace = Long.parseLong(args[2]);
        boolean onClose = args[3].equals("close");
        int runs = Integer.parseInt(args[4]);
        for (int run = 0; run < runs; run++) {
            runOnce(keys, values, stamps, gap, grace, onClose, args[5]);
        }
    }

    static Topology topology(long gap, long grace, boolean onClose) {
        StreamsBuilder builder = new StreamsBuilder();
        SessionWindowedKStream<String, Long> sessions = builder
                .stream("clicks", Consumed.with(Serdes.String(), Serdes.Long()))
                .groupByKey(Grouped.with(Serdes.String(), Serdes.Long()))
                .windowedBy(SessionWindows.ofInactivityGapAndGrace(
                        Duration.ofMillis(gap), Duration.ofMillis(grace)));
        if (onClose) {
            sessions = sessions.emitStrategy(EmitStrategy.onWindowClose());
        }
        sessions.count(Materialized.<String, Long, SessionStore<Bytes, byte[]>>as(STORE)
                        .withKeySerde(Serdes.String()))
                .toStream()
                .to("sessions", Produced.with(
                        WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.Long()));
        return builder.build();
    }

    static void runOnce(String[] keys, long[] values, long[] stamps, long gap, long grace,
                        boolean onClose, String storeType) {
        Properties props = new Properties();
        props.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG, storeType.equals("in_memory")
                ? BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class
                : BuiltInDslStoreSuppliers.RocksDBDslStoreSuppliers.class);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "driver-session-count");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        try (TopologyTestDriver driver = new TopologyTestDriver(
                topology(gap, grace, onClose), props, Instant.ofEpochMilli(0))) {
            TestInputTopic<String, Long> input = driver.createInputTopic(
                    "clicks", Serdes.String().serializer(), Serdes.Long().serializer());
            long t0 = System.nanoTime();
            for (int i = 0; i < keys.length; i++) {
                input.pipeInput(keys[i], values[i], stamps[i]);
            }
            double seconds = (System.nanoTime() - t0) / 1e9;
            long out = driver.createOutputTopic("sessions",
                    WindowedSerdes.sessionWindowedSerdeFrom(String.class).deserializer(),
                    Serdes.Long().deserializer()).getQueueSize();
            long stored = 0;
            SessionStore<String, Long> store = driver.getSessionStore(STORE);
            try (KeyValueIterator<?, Long> all = store.fetch(null, null)) {
                while (all.hasNext()) {
                    all.next();
                    stored++;
                }
            } catch (NullPointerException | IllegalArgumentException e) {
                stored = -1; // a store that cannot list every key
            }
            System.out.printf("run %s %d %.4f %d %d %.0f%n", onClose ? "close" : "update",
                    keys.length, seconds, out, stored, dropped(driver.metrics()));
            System.out.flush();
        }
    }

    static double dropped(Map<MetricName, ? extends Metric> metrics) {
        double total = 0;
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            if (e.getKey().name().equals("dropped-records-total")) {
                total += ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        return total;
    }

    static int countLines(Path path) throws IOException {
        try (BufferedReader in = Files.newBufferedReader(path, StandardCharsets.UTF_8)) {
            int n = 0;
            while (in.readLine() != null) {
                n++;
            }
            return n;
        }
    }

    static void read(Path path, String[] keys, long[] values, long[] stamps) throws IOException {
        try (BufferedReader in = Files.newBufferedReader(path, StandardCharsets.UTF_8)) {
            for (int i = 0; i < keys.length; i++) {
                String[] parts = in.readLine().split("\t", 3);
                keys[i] = parts[0];
                values[i] = Long.parseLong(parts[1]);
                stamps[i] = Long.parseLong(parts[2]);
            }
        }
    }
}
