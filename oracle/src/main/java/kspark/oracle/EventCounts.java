package kspark.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.TimeWindowedDeserializer;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyWindowStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.TimestampedWindowStore;
import org.apache.kafka.streams.state.ValueAndTimestamp;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.state.WindowStoreIterator;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Seed 004 as a Kafka Streams application (tests/kafka/test_kafka_cross_language.py): counts
 * events per user and event type in 24-hour windows kept for 30 days (store "event-counts"), or
 * restores that store read-only from another application's changelog, and answers window
 * fetches of its own interactive queries. One JVM runs any number of such applications.
 *
 * <p>Line protocol: each stdin line is a JSON command, answered by one stdout line,
 * {@code {"ok": ...}} or {@code {"error": "..."}}; end of input stops every application.
 * <ul>
 * <li>{@code {"cmd": "count", "app": id, "bootstrap": servers, "events": topic, "config": {...}}}:
 *   the counter (JSON event values with a {@code "type"}, keyed by user; {@code "config"}: more
 *   Kafka Streams settings); answers once RUNNING.</li>
 * <li>{@code {"cmd": "restore", "app": id, "bootstrap": servers, "changelog": topic}}: a
 *   read-only copy of the store, {@code Topology#addReadOnlyStateStore} on another application's
 *   changelog (restored from it, then kept current by a processor that writes its records).</li>
 * <li>{@code {"cmd": "fetch", "app": id, "key": k, "from": ms, "to": ms}}: {@code [[start,
 *   count, ts], ...]}; {@code {"cmd": "fetch_all", "app": id, "from": ms, "to": ms}}:
 *   {@code [[key, start, count, ts], ...]} (window starts in [from, to]).</li>
 * <li>{@code {"cmd": "stats", "app": id}}: {@code {"restored": n, "updated": m}}, the records
 *   Kafka Streams restored into the application's store (state restoration) and those its
 *   updater processor wrote (since the JVM started).</li>
 * <li>{@code {"cmd": "state", "app": id}}; {@code {"cmd": "stop", "app": id}} (leaves the group
 *   and deletes the local state: started again, the application restores its store).</li>
 * </ul>
 */
public final class EventCounts {

    static final String STORE = "event-counts";
    static final Duration DAY = Duration.ofDays(1);
    static final Duration RETENTION = Duration.ofDays(30);
    /** Records of the last 10 days are never late, whatever the order of the input partitions. */
    static final Duration GRACE = Duration.ofDays(10);

    static final Map<String, KafkaStreams> APPS = new LinkedHashMap<>();

    private EventCounts() {
    }

    public static void main(final String[] args) throws Exception {
        final PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        final BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) {
                    continue;
                }
                final ObjectNode answer = Oracle.NODES.objectNode();
                try {
                    answer.set("ok", handle(Oracle.JSON.readTree(line)));
                } catch (final Exception e) {
                    answer.put("error", Oracle.describe(e));
                }
                out.println(answer);
            }
        } finally {
            for (final KafkaStreams streams : APPS.values()) {
                streams.close(Duration.ofSeconds(10));
            }
        }
    }

    static JsonNode handle(final JsonNode cmd) throws Exception {
        final String name = cmd.path("cmd").asText();
        final String app = cmd.path("app").asText();
        switch (name) {
            case "count" -> start(app, counter(cmd.path("events").asText()), cmd);
            case "restore" -> start(app, reader(cmd.path("changelog").asText(), counts(app).updated), cmd);
            case "stats" -> {
                final ObjectNode stats = Oracle.NODES.objectNode();
                stats.put("restored", counts(app).restored.get());
                stats.put("updated", counts(app).updated.get());
                return stats;
            }
            case "fetch" -> {
                return fetch(app, cmd.path("key").asText(), cmd.path("from").asLong(), cmd.path("to").asLong());
            }
            case "fetch_all" -> {
                return fetchAll(app, cmd.path("from").asLong(), cmd.path("to").asLong());
            }
            case "state" -> {
                return Oracle.NODES.textNode(streams(app).state().toString());
            }
            case "stop" -> {
                // leaving the group: a restarted instance need not wait for the session timeout
                final KafkaStreams streams = streams(app);
                streams.close(CloseOptions.timeout(Duration.ofSeconds(30))
                    .withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
                streams.cleanUp();
                APPS.remove(app);
            }
            default -> throw new Oracle.CaseError("unknown command '" + name + "' (known: count, fetch, fetch_all, restore, state, stats, stop)");
        }
        return Oracle.NODES.booleanNode(true);
    }

    /** Records restored into an application's store, and written by its updater processor. */
    static final class Counts {
        final AtomicLong restored = new AtomicLong();
        final AtomicLong updated = new AtomicLong();
    }

    static final Map<String, Counts> COUNTS = new ConcurrentHashMap<>();

    static Counts counts(final String app) {
        return COUNTS.computeIfAbsent(app, a -> new Counts());
    }

    static KafkaStreams streams(final String app) {
        final KafkaStreams streams = APPS.get(app);
        if (streams == null) {
            throw new Oracle.CaseError("no application '" + app + "' (running: " + APPS.keySet() + ")");
        }
        return streams;
    }

    /** Events per user and type in 24-hour windows kept 30 days: seed 004's counter. */
    static Topology counter(final String events) {
        final StreamsBuilder builder = new StreamsBuilder();
        builder.stream(events, Consumed.with(Serdes.String(), Serdes.String()))
            .groupBy((user, event) -> user + "|" + eventType(event), Grouped.with(Serdes.String(), Serdes.String()))
            .windowedBy(TimeWindows.ofSizeAndGrace(DAY, GRACE))
            .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as(STORE)
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.Long())
                .withRetention(RETENTION));
        return builder.build();
    }

    static String eventType(final String json) {
        try {
            return Oracle.JSON.readTree(json).path("type").asText();
        } catch (final Exception e) {
            throw new IllegalArgumentException("not a JSON event: " + json, e);
        }
    }

    /** The counter's store, read-only, restored from (and kept current by) its changelog. */
    static Topology reader(final String changelog, final AtomicLong updated) {
        final TimeWindowedDeserializer<String> keys = new TimeWindowedDeserializer<>(new StringDeserializer(), DAY.toMillis());
        keys.setIsChangelogTopic(true);
        final Topology topology = new Topology();
        topology.addReadOnlyStateStore(
            Stores.timestampedWindowStoreBuilder(
                Stores.persistentTimestampedWindowStore(STORE, RETENTION, DAY, false), Serdes.String(), Serdes.Long()),
            "changelog-source", keys, new LongDeserializer(), changelog, "changelog-updater", () -> new Updater(updated));
        return topology;
    }

    /** Writes the changelog's records into the read-only store (a null value deletes). */
    static final class Updater implements Processor<Windowed<String>, Long, Void, Void> {
        final AtomicLong updated;
        TimestampedWindowStore<String, Long> store;

        Updater(final AtomicLong updated) {
            this.updated = updated;
        }

        @Override
        public void init(final ProcessorContext<Void, Void> context) {
            store = context.getStateStore(STORE);
        }

        @Override
        public void process(final Record<Windowed<String>, Long> record) {
            final ValueAndTimestamp<Long> value = record.value() == null ? null : ValueAndTimestamp.make(record.value(), record.timestamp());
            store.put(record.key().key(), value, record.key().window().start());
            updated.incrementAndGet();
        }
    }

    static void start(final String app, final Topology topology, final JsonNode cmd) throws Exception {
        if (APPS.containsKey(app)) {
            throw new Oracle.CaseError("application '" + app + "' is already running");
        }
        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, cmd.path("bootstrap").asText());
        props.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("kspark-java-" + app).toString());
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        cmd.path("config").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
        final KafkaStreams streams = new KafkaStreams(topology, props);
        final AtomicLong restored = counts(app).restored;
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(final TopicPartition partition, final String store, final long start, final long end) {
            }

            @Override
            public void onBatchRestored(final TopicPartition partition, final String store, final long end, final long n) {
                restored.addAndGet(n);
            }

            @Override
            public void onRestoreEnd(final TopicPartition partition, final String store, final long total) {
            }
        });
        APPS.put(app, streams);
        streams.start();
        final long deadline = System.currentTimeMillis() + 90_000;
        while (streams.state() != KafkaStreams.State.RUNNING) {
            if (streams.state() == KafkaStreams.State.ERROR || System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("application '" + app + "' is " + streams.state() + ", not RUNNING");
            }
            Thread.sleep(50);
        }
    }

    static ReadOnlyWindowStore<String, ValueAndTimestamp<Long>> store(final String app) {
        return streams(app).store(StoreQueryParameters.fromNameAndType(STORE, QueryableStoreTypes.timestampedWindowStore()));
    }

    static ArrayNode fetch(final String app, final String key, final long from, final long to) {
        final ArrayNode out = Oracle.NODES.arrayNode();
        try (WindowStoreIterator<ValueAndTimestamp<Long>> it = store(app).fetch(key, Instant.ofEpochMilli(from), Instant.ofEpochMilli(to))) {
            while (it.hasNext()) {
                final KeyValue<Long, ValueAndTimestamp<Long>> kv = it.next();
                out.addArray().add(kv.key).add(kv.value.value()).add(kv.value.timestamp());
            }
        }
        return out;
    }

    static ArrayNode fetchAll(final String app, final long from, final long to) {
        final ArrayNode out = Oracle.NODES.arrayNode();
        try (KeyValueIterator<Windowed<String>, ValueAndTimestamp<Long>> it = store(app).fetchAll(Instant.ofEpochMilli(from), Instant.ofEpochMilli(to))) {
            while (it.hasNext()) {
                final KeyValue<Windowed<String>, ValueAndTimestamp<Long>> kv = it.next();
                out.addArray().add(kv.key.key()).add(kv.key.window().start()).add(kv.value.value()).add(kv.value.timestamp());
            }
        }
        return out;
    }
}
