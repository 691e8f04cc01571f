package kspark.anchor;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

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

/**
 * The test-driver benchmark of {@code benchmarks/driver_punctuated_kv.py} in Kafka Streams' own
 * {@link TopologyTestDriver}: {@code kspark/examples/click_counter.py} with the Processor API.
 * Clicks (String user, JSON value) are counted per user in the key-value store
 * {@code click-counts} (logged, no cache, as kspark's {@code Stores.key_value_store}); a
 * STREAM_TIME punctuator forwards every user's count each 60 s of stream time to topic
 * {@code click-counts-report} (String key, Long value).
 *
 * <p>Usage: {@code DriverClickCounter <clicks file> <runs>}. The clicks file has one click per
 * line, {@code user<TAB>json value<TAB>timestamp}, in arrival order. Each run pipes every click
 * through a fresh driver and prints {@code run <records> <seconds> <records out>}.
 */
public final class DriverClickCounter {
    static final String STORE = "click-counts";
    static final Duration REPORT_INTERVAL = Duration.ofMillis(60_000);

    private DriverClickCounter() {
    }

    /** Counts clicks per user; forwards all counts every report interval of stream time. */
    static final class ClickCounter implements Processor<String, JsonNode, String, Long> {
        private ProcessorContext<String, Long> context;
        private KeyValueStore<String, Long> counts;

        @Override
        public void init(final ProcessorContext<String, Long> context) {
            this.context = context;
            this.counts = context.getStateStore(STORE);
            context.schedule(REPORT_INTERVAL, PunctuationType.STREAM_TIME, this::report);
        }

        @Override
        public void process(final Record<String, JsonNode> record) {
            final Long count = counts.get(record.key());
            counts.put(record.key(), count == null ? 1L : count + 1);
        }

        private void report(final long timestamp) {
            try (KeyValueIterator<String, Long> all = counts.all()) {
                while (all.hasNext()) {
                    final KeyValue<String, Long> kv = all.next();
                    context.forward(new Record<>(kv.key, kv.value, timestamp));
                }
            }
        }
    }

    static Topology topology(final Serde<JsonNode> json) {
        final Topology topology = new Topology();
        topology.addSource("clicks", Serdes.String().deserializer(), json.deserializer(), "clicks");
        topology.addProcessor("counter", ClickCounter::new, "clicks");
        topology.addStateStore(Stores.keyValueStoreBuilder(
                Stores.inMemoryKeyValueStore(STORE), Serdes.String(), Serdes.Long())
                .withCachingDisabled(), "counter");
        topology.addSink("report", "click-counts-report", Serdes.String().serializer(),
                Serdes.Long().serializer(), "counter");
        return topology;
    }

    public static void main(final String[] args) throws IOException {
        if (args.length != 2) {
            System.err.println("usage: DriverClickCounter <clicks file> <runs>");
            System.exit(2);
        }
        final ObjectMapper mapper = new ObjectMapper();
        final Serializer<JsonNode> toJson = (topic, node) -> {
            try {
                return mapper.writeValueAsBytes(node);
            } catch (IOException e) {
                throw new IllegalArgumentException(e);
            }
        };
        final Deserializer<JsonNode> fromJson = (topic, bytes) -> {
            try {
                return bytes == null ? null : mapper.readTree(bytes);
            } catch (IOException e) {
                throw new IllegalArgumentException(e);
            }
        };
        final Serde<JsonNode> json = Serdes.serdeFrom(toJson, fromJson);
        final List<String> users = new ArrayList<>();
        final List<JsonNode> values = new ArrayList<>();
        final List<Long> stamps = new ArrayList<>();
        try (BufferedReader in = Files.newBufferedReader(Path.of(args[0]), StandardCharsets.UTF_8)) {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                final String[] parts = line.split("\t", 3);
                users.add(parts[0]);
                values.add(mapper.readTree(parts[1]));
                stamps.add(Long.parseLong(parts[2]));
            }
        }
        final int runs = Integer.parseInt(args[1]);
        for (int run = 0; run < runs; run++) {
            final Properties props = new Properties();
            props.put(StreamsConfig.APPLICATION_ID_CONFIG, "driver-click-counter");
            props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
            try (TopologyTestDriver driver = new TopologyTestDriver(
                    topology(json), props, Instant.ofEpochMilli(0))) {
                final TestInputTopic<String, JsonNode> input = driver.createInputTopic(
                        "clicks", Serdes.String().serializer(), toJson);
                final long t0 = System.nanoTime();
                for (int i = 0; i < users.size(); i++) {
                    input.pipeInput(users.get(i), values.get(i), stamps.get(i));
                }
                final double seconds = (System.nanoTime() - t0) / 1e9;
                final long out = driver.createOutputTopic("click-counts-report",
                        Serdes.String().deserializer(), Serdes.Long().deserializer())
                        .getQueueSize();
                System.out.printf("run %d %.4f %d%n", users.size(), seconds, out);
                System.out.flush();
            }
        }
    }
}
