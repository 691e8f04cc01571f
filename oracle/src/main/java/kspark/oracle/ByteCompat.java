package kspark.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Window;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.kstream.internals.SessionWindow;
import org.apache.kafka.streams.kstream.internals.TimeWindow;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.processor.internals.ProcessorContextImpl;
import org.apache.kafka.streams.processor.internals.ProcessorStateManager;
import org.apache.kafka.streams.processor.internals.StreamTask;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.test.TestRecord;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.TreeSet;

/**
 * Byte compatibility with Kafka Streams' own serdes and stores (tests/oracle/test_byte_compat.py).
 *
 * <p>{@link #changelogLines}: the records a case wrote to its stores' changelog topics, read from
 * the {@link TopologyTestDriver} (cases with {@code "changelogs": true}). {@link #handle}: the
 * requests of the oracle's batch protocol that are not topologies ({@code "request"}):
 * {@code "serde"} runs keys through {@link WindowedSerdes}, {@code "restore"} restores a Kafka
 * Streams store from changelog records and prints its contents, {@code "window_puts"} prints the
 * changelog of a Processor API window store, {@code "restore_and_run"} restores every named store
 * of a case's topology from changelog records and then runs the case
 * (tests/oracle/test_join_byte_compat.py). Bytes travel as hex strings.
 */
final class ByteCompat {

    static final HexFormat HEX = HexFormat.of();
    static final String APPLICATION_ID = "kspark-oracle";

    private ByteCompat() {
    }

    // -- changelogs of a case --------------------------------------------------------------------

    /** One line per changelog record of each store, in the order Kafka Streams wrote them. */
    static void changelogLines(final TopologyTestDriver driver, final Collection<String> stores, final ArrayNode lines) {
        for (final String store : stores) {
            final String topic = APPLICATION_ID + "-" + store + "-changelog";
            final var out = driver.createOutputTopic(topic, new ByteArrayDeserializer(), new ByteArrayDeserializer());
            for (final TestRecord<byte[], byte[]> r : out.readRecordsToList()) {
                final ObjectNode line = lines.addObject();
                line.put("kind", "changelog");
                line.put("store", store);
                line.put("key", hex(r.key()));
                line.put("value", hex(r.value()));
                line.put("ts", r.timestamp());
                final ArrayNode headers = line.putArray("headers");
                for (final Header h : r.headers()) {
                    headers.addArray().add(h.key()).add(hex(h.value()));
                }
            }
        }
    }

    static String hex(final byte[] bytes) {
        return bytes == null ? null : HEX.formatHex(bytes);
    }

    static byte[] unhex(final JsonNode node) {
        return node == null || node.isNull() ? null : HEX.parseHex(node.asText());
    }

    // -- requests ----------------------------------------------------------------------------------

    static ArrayNode handle(final JsonNode doc, final Path stateDir) throws IOException {
        final String request = doc.get("request").asText();
        return switch (request) {
            case "serde" -> serde(doc);
            case "restore" -> restore(doc, stateDir);
            case "window_puts" -> windowPuts(doc, stateDir);
            case "restore_and_run" -> restoreAndRun(doc, stateDir);
            case "describe" -> Dsl.describe(doc);
            // the requests on stores, then the one on a whole application
            default -> throw new Oracle.CaseError("unknown request '" + request
                + "' (known: describe, restore, serde, window_puts) (to restart a case from changelogs: restore_and_run)");
        };
    }

    static JsonNode need(final JsonNode doc, final String field) {
        final JsonNode v = doc.get(field);
        if (v == null || v.isNull()) {
            throw new Oracle.CaseError("request '" + doc.get("request").asText() + "' needs \"" + field + "\"");
        }
        return v;
    }

    /**
     * {@code {"request": "serde", "windowed": "session" | "time", "size": ms (time),
     * "serialize": [{"key", "start", "end"}], "deserialize": [hex]}}: one line per key to
     * serialize ({@code {"bytes": hex}}), then one per byte string to deserialize
     * ({@code {"key", "start", "end"}} or {@code {"error": message}}).
     */
    static ArrayNode serde(final JsonNode doc) {
        final String kind = need(doc, "windowed").asText();
        final Serde<Windowed<String>> serde = switch (kind) {
            case "session" -> WindowedSerdes.sessionWindowedSerdeFrom(String.class);
            case "time" -> WindowedSerdes.timeWindowedSerdeFrom(String.class, need(doc, "size").asLong());
            default -> throw new Oracle.CaseError("unknown windowed serde '" + kind + "' (known: session, time)");
        };
        final ArrayNode lines = Oracle.NODES.arrayNode();
        for (final JsonNode k : doc.path("serialize")) {
            final long start = k.get("start").asLong();
            final long end = k.get("end").asLong();
            final Window window = kind.equals("session") ? new SessionWindow(start, end) : new TimeWindow(start, end);
            final String key = k.get("key").isNull() ? null : k.get("key").asText();
            final ObjectNode line = lines.addObject();
            try {
                line.put("bytes", hex(serde.serializer().serialize("t", new Windowed<>(key, window))));
            } catch (final RuntimeException e) {
                line.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
        }
        for (final JsonNode b : doc.path("deserialize")) {
            final ObjectNode line = lines.addObject();
            try {
                final Windowed<String> w = serde.deserializer().deserialize("t", unhex(b));
                line.put("key", w.key());
                line.put("start", w.window().start());
                line.put("end", w.window().end());
            } catch (final RuntimeException e) {
                line.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
            }
        }
        return lines;
    }

    /**
     * {@code {"request": "restore", "kind": "window" | "session" | "kv_ts" | "kv" | "versioned",
     * "store_type": "rocksdb" | "in_memory", "retention": ms, "size": ms, "history": ms
     * (versioned, always RocksDB), "value": "long" | "string",
     * "keys": [...] (sessions), "records": [{"key": hex, "value": hex | null, "ts": t}]}}: a store
     * like the DSL's is attached to its changelog topic with {@code Topology#addReadOnlyStateStore}
     * in a {@link TopologyTestDriver}, and the driver task's own state manager restores it from
     * the records ({@code ProcessorStateManager#restore}: the store's restore callback after the
     * record converter Kafka Streams picks for the store), as at the start of a Kafka Streams
     * application. The lines are the store's contents, as the oracle prints a case's stores.
     */
    static ArrayNode restore(final JsonNode doc, final Path stateDir) {
        final String kind = need(doc, "kind").asText();
        final String name = doc.path("store").asText("store");
        final String topic = APPLICATION_ID + "-" + name + "-changelog";
        final Topology topology = new Topology();
        topology.addReadOnlyStateStore(storeBuilder(doc, kind, name), "changelog-source",
            new ByteArrayDeserializer(), new ByteArrayDeserializer(), topic, "changelog-updater",
            Ignore::new);
        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, APPLICATION_ID);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "oracle:9092");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        try (TopologyTestDriver driver = new TopologyTestDriver(topology, props)) {
            final List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
            long offset = 0;
            for (final JsonNode r : doc.path("records")) {
                final byte[] key = unhex(r.get("key"));
                final byte[] value = unhex(r.get("value"));
                records.add(new ConsumerRecord<>(topic, 0, offset++, r.get("ts").asLong(),
                    TimestampType.CREATE_TIME, key.length, value == null ? -1 : value.length, key, value,
                    new RecordHeaders(), Optional.empty()));
            }
            restoreInDriver(driver, new TopicPartition(topic, 0), records);
            return dump(driver, kind, name, doc.path("keys"));
        } finally {
            Oracle.deleteTree(stateDir);
        }
    }

    static StoreBuilder<?> storeBuilder(final JsonNode doc, final String kind, final String name) {
        final boolean rocks = doc.path("store_type").asText("rocksdb").equals("rocksdb");
        final Serde<Object> values = Oracle.cast(doc.path("value").asText("long").equals("string") ? Serdes.String() : Serdes.Long());
        final StoreBuilder<?> builder = switch (kind) {
            case "window" -> {
                final Duration retention = Duration.ofMillis(need(doc, "retention").asLong());
                final Duration size = Duration.ofMillis(need(doc, "size").asLong());
                yield Stores.timestampedWindowStoreBuilder(rocks
                    ? Stores.persistentTimestampedWindowStore(name, retention, size, false)
                    : Stores.inMemoryWindowStore(name, retention, size, false), Serdes.String(), values);
            }
            case "session" -> {
                final Duration retention = Duration.ofMillis(need(doc, "retention").asLong());
                yield Stores.sessionStoreBuilder(rocks
                    ? Stores.persistentSessionStore(name, retention)
                    : Stores.inMemorySessionStore(name, retention), Serdes.String(), values);
            }
            case "kv_ts" -> Stores.timestampedKeyValueStoreBuilder(rocks
                ? Stores.persistentTimestampedKeyValueStore(name)
                : Stores.inMemoryKeyValueStore(name), Serdes.String(), values);
            case "kv" -> Stores.keyValueStoreBuilder(rocks
                ? Stores.persistentKeyValueStore(name)
                : Stores.inMemoryKeyValueStore(name), Serdes.String(), values);
            case "versioned" -> Stores.versionedKeyValueStoreBuilder(Stores.persistentVersionedKeyValueStore(
                name, Duration.ofMillis(need(doc, "history").asLong())), Serdes.String(), values);
            default -> throw new Oracle.CaseError("unknown store kind '" + kind + "' (known: kv, kv_ts, session, versioned, window)");
        };
        return builder.withLoggingDisabled().withCachingDisabled();
    }

    /**
     * {@code {"request": "window_puts", "retention": ms, "size": ms, "duplicates": bool,
     * "inputs": [{"key", "value": long | null, "ts"}]}}: a Processor API window store (logged,
     * no cache) gets {@code put(key, value, ts - ts mod size)} for each input record; the lines
     * are its changelog records.
     */
    static ArrayNode windowPuts(final JsonNode doc, final Path stateDir) {
        final long size = need(doc, "size").asLong();
        final Topology topology = new Topology();
        topology.addSource("source", new StringDeserializer(), new LongDeserializer(), "in");
        topology.addProcessor("puts", () -> new WindowPuts(size), "source");
        topology.addStateStore(Stores.windowStoreBuilder(Stores.persistentWindowStore("store",
            Duration.ofMillis(need(doc, "retention").asLong()), Duration.ofMillis(size),
            doc.path("duplicates").asBoolean(false)), Serdes.String(), Serdes.Long()), "puts");
        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, APPLICATION_ID);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "oracle:9092");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        final ArrayNode lines = Oracle.NODES.arrayNode();
        try (TopologyTestDriver driver = new TopologyTestDriver(topology, props)) {
            final var in = driver.createInputTopic("in", new StringSerializer(), new LongSerializer());
            for (final JsonNode r : doc.path("inputs")) {
                in.pipeInput(r.get("key").asText(), r.get("value").isNull() ? null : r.get("value").asLong(), r.get("ts").asLong());
            }
            changelogLines(driver, List.of("store"), lines);
        } finally {
            Oracle.deleteTree(stateDir);
        }
        return lines;
    }

    /** Puts each record into the window starting at {@code ts - ts mod size}. */
    static final class WindowPuts implements Processor<String, Long, Void, Void> {
        final long size;
        WindowStore<String, Long> store;

        WindowPuts(final long size) {
            this.size = size;
        }

        @Override
        public void init(final ProcessorContext<Void, Void> context) {
            store = context.getStateStore("store");
        }

        @Override
        public void process(final Record<String, Long> record) {
            store.put(record.key(), record.value(), record.timestamp() - Math.floorMod(record.timestamp(), size));
        }
    }

    /**
     * {@code {"request": "restore_and_run", "case": {shape case}, "changelogs": {store:
     * [{"key": hex, "value": hex | null, "ts": t | null}, ...]}}}: a Kafka Streams application restarted
     * from changelogs. The case's topology is built and its driver created as for any case
     * ({@link Oracle#runCase}); then each named store is restored from its records by the driver
     * task's own state manager ({@link #restoreInDriver}, the store's changelog partition
     * {@code <application.id>-<store>-changelog}-0, offsets from 0), as at the start of a Kafka
     * Streams application whose changelog topics hold those records; then the case's inputs are
     * piped. The lines are the case's usual lines (output records, with {@code "changelogs":
     * true} the changelog records written after the restore, the stores). The operators' own
     * memory (observed stream times, a stream-stream join's shared time tracker) starts afresh,
     * as in a restarted application.
     */
    static ArrayNode restoreAndRun(final JsonNode doc, final Path stateDir) throws IOException {
        final JsonNode theCase = need(doc, "case");
        if (!theCase.isObject() || theCase.has("request")) {
            throw new Oracle.CaseError("request 'restore_and_run' needs a \"case\" with a shape, got " + theCase);
        }
        final JsonNode changelogs = doc.path("changelogs");
        if (!changelogs.isMissingNode() && !changelogs.isNull() && !changelogs.isObject()) {
            throw new Oracle.CaseError("request 'restore_and_run': \"changelogs\" must map store names to records, got " + changelogs);
        }
        return Oracle.runCase(theCase, stateDir, (driver, built) -> {
            final TreeSet<String> stores = Joins.storeNames(built.topology);
            final var names = changelogs.fieldNames();
            while (names.hasNext()) {
                final String store = names.next();
                if (!stores.contains(store)) {
                    throw new Oracle.CaseError("request 'restore_and_run': the case's topology has no store '" + store
                        + "' (its stores: " + stores + ")");
                }
                if (!changelogs.get(store).isArray()) {
                    throw new Oracle.CaseError("request 'restore_and_run': the changelog of store '" + store
                        + "' must be a list of records, got " + changelogs.get(store));
                }
                final String topic = APPLICATION_ID + "-" + store + "-changelog";
                final List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
                long offset = 0;
                for (final JsonNode r : changelogs.get(store)) {
                    final byte[] key = unhex(r.get("key"));
                    final byte[] value = unhex(r.get("value"));
                    final JsonNode ts = r.get("ts");
                    if (key == null || ts == null || !(ts.isNull() || ts.isIntegralNumber())) {
                        throw new Oracle.CaseError("request 'restore_and_run': a changelog record needs a hex \"key\" and a \"ts\" "
                            + "(an integer, or null for a record without timestamp), got " + r);
                    }
                    // a record written without timestamp (a suppression or join buffer's) is read
                    // back with none: ConsumerRecord.NO_TIMESTAMP
                    records.add(new ConsumerRecord<>(topic, 0, offset++, ts.isNull() ? ConsumerRecord.NO_TIMESTAMP : ts.asLong(),
                        TimestampType.CREATE_TIME, key.length, value == null ? -1 : value.length, key, value,
                        new RecordHeaders(), Optional.empty()));
                }
                try {
                    restoreInDriver(driver, new TopicPartition(topic, 0), records);
                } catch (final IllegalStateException e) {
                    if (e.getMessage() != null && e.getMessage().startsWith("no store restores from")) {
                        throw new Oracle.CaseError("request 'restore_and_run': store '" + store
                            + "' keeps no changelog in this case (logging disabled, or a global store)");
                    }
                    throw e;
                }
            }
        });
    }

    /** {@code ProcessorStateManager#restore} of the driver's task (package-private there). */
    static void restoreInDriver(final TopologyTestDriver driver, final TopicPartition changelog,
                                final List<ConsumerRecord<byte[], byte[]>> records) {
        try {
            final Field taskField = TopologyTestDriver.class.getDeclaredField("task");
            taskField.setAccessible(true);
            final StreamTask task = (StreamTask) taskField.get(driver);
            final ProcessorStateManager manager = ((ProcessorContextImpl) task.processorContext()).stateManager();
            final Method metadata = ProcessorStateManager.class.getDeclaredMethod("storeMetadata", TopicPartition.class);
            metadata.setAccessible(true);
            final Object store = metadata.invoke(manager, changelog);
            if (store == null) {
                throw new IllegalStateException("no store restores from " + changelog);
            }
            final Method restore = ProcessorStateManager.class.getDeclaredMethod(
                "restore", ProcessorStateManager.StateStoreMetadata.class, List.class, OptionalLong.class);
            restore.setAccessible(true);
            restore.invoke(manager, store, records, OptionalLong.empty());
        } catch (final InvocationTargetException e) {
            throw e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
        } catch (final ReflectiveOperationException e) {
            throw new IllegalStateException("restoring in the test driver: " + e, e);
        }
    }

    static ArrayNode dump(final TopologyTestDriver driver, final String kind, final String name, final JsonNode keys) {
        final ArrayNode lines = Oracle.NODES.arrayNode();
        final TreeSet<String> sessionKeys = new TreeSet<>();
        keys.forEach(k -> sessionKeys.add(k.asText()));
        Oracle.dumpStore(driver, name, kind, sessionKeys, lines);
        return lines;
    }

    /** The read-only store's processor: the store is restored from its changelog, not written. */
    static final class Ignore implements Processor<byte[], byte[], Void, Void> {
        @Override
        public void process(final Record<byte[], byte[]> record) {
        }
    }
}
