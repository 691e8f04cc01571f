package kspark.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Aggregator;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Initializer;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Merger;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Reducer;
import org.apache.kafka.streams.kstream.SessionWindowedDeserializer;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindowedDeserializer;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.processor.Cancellable;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.ValueAndTimestamp;
import org.apache.kafka.streams.state.VersionedKeyValueStore;
import org.apache.kafka.streams.state.VersionedRecord;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.test.TestRecord;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

/**
 * The Kafka Streams oracle: runs a topology described as data (a "shape" plus its parameters)
 * and input records through Kafka Streams' {@link TopologyTestDriver}, and prints every output
 * record and the final contents of the shape's named stores.
 *
 * <p>Single mode ({@code java -jar kspark-oracle.jar}): stdin holds one JSON case document;
 * stdout gets one JSON line per output record ({@code "kind": "record"}), then one per store
 * entry ({@code "kind": "store"}). An error (unknown shape or parameter, a bad value, a failure in
 * Kafka Streams) goes to stderr and the exit code is 2.
 *
 * <p>Batch mode ({@code --batch}): each stdin line is a case (with an {@code "id"}); each case
 * gets one stdout line {@code {"id": ..., "lines": [...]}} or {@code {"id": ..., "error": "..."}},
 * flushed at once, so one JVM can serve many cases (also interactively). The exit code is 2 if any
 * case failed.
 *
 * <p>A case: {@code {"shape": S, "params": {...}, "inputs": [{"key": k, "value": v, "ts": t} |
 * {"advance_wall_clock": ms}, ...]}}; an input record's optional {@code "topic"} names the input
 * topic ({@code "in"} by default; the join shapes of {@link Joins} read "left" and "right").
 * Shapes, parameters and the user functions behind each {@code op} are documented in
 * tests/oracle/README.md; they are mirrored in tests/oracle/kspark_side.py.
 */
public final class Oracle {

    static final ObjectMapper JSON = new ObjectMapper();
    static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    /** A case the oracle cannot express or run; the message names what was wrong. */
    static final class CaseError extends RuntimeException {
        CaseError(final String message) {
            super(message);
        }
    }

    static final Set<String> COMMON = Set.of("store_type", "emit_interval");
    static final Map<String, Set<String>> SHAPES = new LinkedHashMap<>();
    static final Set<String> VALUE_OPS = Set.of("count", "sum", "reduce_sum", "reduce_max", "concat", "reduce_concat");

    static {
        SHAPES.put("session", Set.of("op", "gap", "grace", "emit", "caching", "suppress", "retention", "none_on", "raise_on", "store_named",
            "merger_none_on", "merger_raise_on"));
        SHAPES.put("time_window", Set.of("op", "size", "advance", "grace", "emit", "caching", "suppress", "retention", "none_on", "raise_on", "store_named"));
        SHAPES.put("sliding", Set.of("op", "diff", "grace", "emit", "caching", "suppress", "retention", "none_on", "raise_on", "store_named"));
        SHAPES.put("stream_aggregate", Set.of("op", "caching", "suppress", "none_on", "raise_on", "store_named"));
        SHAPES.put("table_aggregate", Set.of("op", "groups", "caching", "source_caching", "int_key_on", "store_named", "none_on", "raise_on",
            "subtractor_none_on", "subtractor_raise_on"));
        SHAPES.put("punctuator", Set.of("stream_interval", "wall_interval", "stream_cancel_after", "wall_cancel_after", "caching",
            "stream_raise_at", "wall_raise_at"));
        SHAPES.putAll(Joins.SHAPES);
        SHAPES.putAll(Dsl.SHAPES);
    }

    private Oracle() {
    }

    public static void main(final String[] args) throws IOException {
        boolean batch = false;
        for (final String arg : args) {
            if (arg.equals("--batch")) {
                batch = true;
            } else if (arg.equals("--shapes")) {
                final ObjectNode out = NODES.objectNode();
                SHAPES.forEach((shape, params) -> {
                    final ArrayNode names = out.putArray(shape);
                    new TreeSet<>(params).forEach(names::add);
                });
                System.out.println(out);
                return;
            } else {
                System.err.println("kspark-oracle: unknown argument '" + arg + "' (expected --batch or --shapes)");
                System.exit(2);
            }
        }
        final PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        final BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        final Path stateRoot = Files.createTempDirectory("kspark-oracle-");
        int failures = 0;
        try {
            if (batch) {
                String line;
                int n = 0;
                while ((line = in.readLine()) != null) {
                    if (line.isBlank()) {
                        continue;
                    }
                    final ObjectNode result = NODES.objectNode();
                    JsonNode id = null;
                    try {
                        final JsonNode doc = JSON.readTree(line);
                        id = doc.get("id");
                        result.set("id", id);
                        result.set("lines", runCase(doc, stateRoot.resolve("case-" + n++)));
                    } catch (final Exception e) {
                        failures++;
                        result.removeAll();
                        result.set("id", id);
                        result.put("error", describe(e));
                    }
                    out.println(result);
                    out.flush();
                }
            } else {
                final StringBuilder text = new StringBuilder();
                String line;
                while ((line = in.readLine()) != null) {
                    text.append(line).append('\n');
                }
                try {
                    final ArrayNode lines = runCase(JSON.readTree(text.toString()), stateRoot.resolve("case"));
                    for (final JsonNode node : lines) {
                        out.println(node);
                    }
                } catch (final Exception e) {
                    failures++;
                    System.err.println("kspark-oracle: " + describe(e));
                }
                out.flush();
            }
        } finally {
            deleteTree(stateRoot);
        }
        System.exit(failures == 0 ? 0 : 2);
    }

    static String describe(final Exception e) {
        if (e instanceof CaseError) {
            return e.getMessage();
        }
        final StringBuilder s = new StringBuilder(e.getClass().getName() + ": " + e.getMessage());
        Throwable cause = e.getCause();
        while (cause != null) {
            s.append(" | caused by ").append(cause.getClass().getName()).append(": ").append(cause.getMessage());
            cause = cause.getCause();
        }
        return s.toString();
    }

    static void deleteTree(final Path root) {
        try (var paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (final IOException ignored) {
            // best effort
        }
    }

    // -- parameters ------------------------------------------------------------------------------

    /** The parameters of one case, checked against the shape's list. */
    static final class Params {
        final String shape;
        final JsonNode node;

        Params(final String shape, final JsonNode node) {
            this.shape = shape;
            this.node = node == null || node.isNull() ? NODES.objectNode() : node;
            if (!this.node.isObject()) {
                throw new CaseError("params of shape '" + shape + "' must be an object, got " + this.node);
            }
            final Set<String> allowed = SHAPES.get(shape);
            final Iterator<String> names = this.node.fieldNames();
            while (names.hasNext()) {
                final String name = names.next();
                if (!allowed.contains(name) && !COMMON.contains(name)) {
                    final TreeSet<String> known = new TreeSet<>(allowed);
                    known.addAll(COMMON);
                    throw new CaseError("unknown parameter '" + name + "' for shape '" + shape + "' (known: " + known + ")");
                }
            }
        }

        boolean has(final String name) {
            return node.has(name) && !node.get(name).isNull();
        }

        long ms(final String name, final Long dflt, final long min) {
            if (!has(name)) {
                if (dflt == null) {
                    throw new CaseError("shape '" + shape + "' needs parameter '" + name + "'");
                }
                return dflt;
            }
            final JsonNode v = node.get(name);
            if (!v.canConvertToLong() || !v.isIntegralNumber()) {
                throw new CaseError("parameter '" + name + "' of shape '" + shape + "' must be an integer, got " + v);
            }
            if (v.asLong() < min) {
                throw new CaseError("parameter '" + name + "' of shape '" + shape + "' must be >= " + min + ", got " + v);
            }
            return v.asLong();
        }

        Long optMs(final String name, final long min) {
            return has(name) ? ms(name, null, min) : null;
        }

        boolean bool(final String name, final boolean dflt) {
            if (!has(name)) {
                return dflt;
            }
            final JsonNode v = node.get(name);
            if (!v.isBoolean()) {
                throw new CaseError("parameter '" + name + "' of shape '" + shape + "' must be true or false, got " + v);
            }
            return v.asBoolean();
        }

        String choice(final String name, final String dflt, final Set<String> choices) {
            if (!has(name)) {
                if (dflt == null) {
                    throw new CaseError("shape '" + shape + "' needs parameter '" + name + "' (one of " + new TreeSet<>(choices) + ")");
                }
                return dflt;
            }
            final JsonNode v = node.get(name);
            if (!v.isTextual() || !choices.contains(v.asText())) {
                throw new CaseError("unknown " + name + " " + v + " for shape '" + shape + "' (known: " + new TreeSet<>(choices) + ")");
            }
            return v.asText();
        }
    }

    // -- one case --------------------------------------------------------------------------------

    /** What a built shape needs to be driven and read. */
    static final class Built {
        Topology topology;
        /** the topics the shape reads (String keys; an input's "topic", "in" when absent) */
        List<String> inputTopics = List.of("in");
        Serde<Object> inputValueSerde;
        Deserializer<?> outputKeyDeserializer;
        Deserializer<?> outputValueDeserializer;
        /** store name -> kind ("session", "window", "kv_ts", "kv") */
        final Map<String, String> stores = new LinkedHashMap<>();
        /** the stores whose changelogs "changelogs": true prints; null: those of {@link #stores} */
        Collection<String> changelogStores;
        boolean windowedOutput;

        /** The stores whose changelogs are printed, in this order (by name, as kspark's side). */
        Collection<String> changelogStores() {
            return changelogStores != null ? changelogStores : new TreeSet<>(stores.keySet());
        }
    }

    /** What runs in a case's driver before its inputs are piped (e.g. restoring its stores). */
    @FunctionalInterface
    interface BeforeInputs {
        void accept(TopologyTestDriver driver, Built built);
    }

    static ArrayNode runCase(final JsonNode doc, final Path stateDir) throws IOException {
        if (doc == null || !doc.isObject()) {
            throw new CaseError("a case must be a JSON object, got " + doc);
        }
        if (doc.has("request")) {
            return ByteCompat.handle(doc, stateDir);
        }
        return runCase(doc, stateDir, (driver, built) -> { });
    }

    /**
     * Runs the case {@code doc} (not a request): builds its shape, creates the driver, calls
     * {@code beforeInputs}, pipes the inputs and prints the output records, the changelogs
     * (with {@code "changelogs": true}) and the stores.
     */
    static ArrayNode runCase(final JsonNode doc, final Path stateDir, final BeforeInputs beforeInputs) throws IOException {
        if (doc == null || !doc.isObject()) {
            throw new CaseError("a case must be a JSON object, got " + doc);
        }
        final Iterator<String> fields = doc.fieldNames();
        while (fields.hasNext()) {
            final String f = fields.next();
            if (!Set.of("id", "shape", "params", "inputs", "changelogs", "describe").contains(f)) {
                throw new CaseError("unknown case field '" + f + "' (known: changelogs, describe, id, inputs, params, shape)");
            }
        }
        final JsonNode shapeNode = doc.get("shape");
        if (shapeNode == null || !shapeNode.isTextual()) {
            throw new CaseError("a case needs a \"shape\" (one of " + SHAPES.keySet() + ")");
        }
        final String shape = shapeNode.asText();
        if (!SHAPES.containsKey(shape)) {
            throw new CaseError("unknown shape '" + shape + "' (known: " + SHAPES.keySet() + ")");
        }
        final Params p = new Params(shape, doc.get("params"));
        final Built built = build(shape, p);

        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "kspark-oracle");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "oracle:9092");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        if (p.choice("store_type", "rocksdb", Set.of("rocksdb", "in_memory")).equals("in_memory")) {
            props.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG, BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class);
        }
        // on_window_close aggregations look for closed windows at most once per this much
        // wall-clock time (an internal config, 1000 ms by default); the test driver's mock clock
        // stands still unless the case advances it, so by default the oracle checks after every
        // record, as kspark does
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION,
            p.ms("emit_interval", 0L, 0));
        // likewise left / outer stream-stream joins look for closed windows at most this often
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX,
            p.ms("emit_interval", 0L, 0));
        final ArrayNode lines = NODES.arrayNode();
        if (doc.path("describe").asBoolean(false)) {
            lines.addObject().put("kind", "describe").put("text", built.topology.describe().toString());
        }
        final TreeSet<String> keys = new TreeSet<>();
        boolean failed = false;
        try (TopologyTestDriver driver = new TopologyTestDriver(built.topology, props, Instant.ofEpochMilli(0))) {
            beforeInputs.accept(driver, built);
            final Map<String, TestInputTopic<String, Object>> in = new LinkedHashMap<>();
            for (final String topic : built.inputTopics) {
                in.put(topic, driver.createInputTopic(topic, Serdes.String().serializer(), built.inputValueSerde.serializer()));
            }
            @SuppressWarnings("unchecked")
            final TestOutputTopic<Object, Object> out = driver.createOutputTopic(
                "out", (Deserializer<Object>) built.outputKeyDeserializer, (Deserializer<Object>) built.outputValueDeserializer);
            final JsonNode inputs = doc.get("inputs");
            if (inputs != null && !inputs.isNull()) {
                if (!inputs.isArray()) {
                    throw new CaseError("\"inputs\" must be a list, got " + inputs);
                }
                int index = -1;
                for (final JsonNode input : inputs) {
                    index++;
                    try {  // a record, or wall-clock time (its punctuators)
                        if (input.has("advance_wall_clock")) {
                            driver.advanceWallClockTime(Duration.ofMillis(input.get("advance_wall_clock").asLong()));
                        } else {
                            final JsonNode k = input.get("key");
                            final JsonNode ts = input.get("ts");
                            if (ts == null || !ts.isIntegralNumber()) {
                                throw new CaseError("an input record needs an integer \"ts\", got " + input);
                            }
                            final String key = k == null || k.isNull() ? null : k.asText();
                            if (key != null) {
                                keys.add(key);
                            }
                            final TestInputTopic<String, Object> topic = inputTopic(in, shape, input);
                            topic.pipeInput(new TestRecord<>(key, inputValue(built, input.get("value")),
                                inputHeaders(input), ts.asLong()));
                        }
                    } catch (final RuntimeException e) {  // a user function failed, or the case is wrong
                        final String kind = failureKind(e);
                        if (kind == null) {
                            throw e;
                        }
                        failed = true;
                        drain(out, built, lines);
                        lines.addObject().put("kind", "error").put("input", index).put("error", kind);
                        break;
                    }
                    drain(out, built, lines);
                }
            }
            if (!failed) {
                drain(out, built, lines);
                if (doc.path("changelogs").asBoolean(false)) {
                    ByteCompat.changelogLines(driver, built.changelogStores(), lines);
                }
                for (final Map.Entry<String, String> store : built.stores.entrySet()) {
                    dumpStore(driver, store.getKey(), store.getValue(), keys, lines);
                }
            }
        } catch (final RuntimeException e) {
            if (!failed) {
                throw e;
            }
            // closing the driver after a failed record may fail again (its caches flushed):
            // the case has already stopped at the first failure
        }
        deleteTree(stateDir);
        return lines;
    }

    /** Thrown by a case's user function on its "raise_on" value (tests/oracle/README.md). */
    static final class UserFunctionError extends RuntimeException {
        UserFunctionError(final Object value) {
            super("user function fails on " + value);
        }
    }

    /**
     * The kind of failure that stopped a case at a record: "user_function" (a {@link
     * UserFunctionError} anywhere in the causes) or "serialization" (a ClassCastException in a
     * serializer: a key of the wrong type); null for any other failure.
     */
    static String failureKind(final Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof UserFunctionError) {
                return "user_function";
            }
            if (t instanceof ClassCastException) {
                return "serialization";
            }
        }
        return null;
    }

    /** The input topic an input record names with "topic" ("in" when absent), if the shape reads it. */
    static TestInputTopic<String, Object> inputTopic(final Map<String, TestInputTopic<String, Object>> topics,
                                                     final String shape, final JsonNode input) {
        final JsonNode t = input.get("topic");
        if (t != null && !t.isNull() && !t.isTextual()) {
            throw new CaseError("an input's \"topic\" must be a string, got " + input);
        }
        final String topic = t == null || t.isNull() ? "in" : t.asText();
        final TestInputTopic<String, Object> in = topics.get(topic);
        if (in == null) {
            throw new CaseError("shape '" + shape + "' does not read topic '" + topic + "' (its input topics: " + topics.keySet() + ")");
        }
        return in;
    }

    /** An input's "headers" ([[name, hex or null], ...]; none when absent). */
    static Headers inputHeaders(final JsonNode input) {
        final RecordHeaders headers = new RecordHeaders();
        for (final JsonNode h : input.path("headers")) {
            headers.add(h.get(0).asText(), ByteCompat.unhex(h.get(1)));
        }
        return headers;
    }

    static Object inputValue(final Built built, final JsonNode v) {
        if (v == null || v.isNull()) {
            return null;
        }
        if (((Object) built.inputValueSerde) instanceof Serdes.LongSerde) {
            if (!v.isIntegralNumber()) {
                throw new CaseError("this case's values must be integers, got " + v);
            }
            return v.asLong();
        }
        if (!v.isTextual()) {
            throw new CaseError("this case's values must be strings, got " + v);
        }
        return v.asText();
    }

    static void drain(final TestOutputTopic<Object, Object> out, final Built built, final ArrayNode lines) {
        for (final TestRecord<Object, Object> r : out.readRecordsToList()) {
            final ObjectNode line = lines.addObject();
            line.put("kind", "record");
            putKey(line, r.key());
            putValue(line, r.value());
            line.put("ts", r.timestamp());
            line.put("tombstone", r.value() == null);
            if (r.headers().toArray().length > 0) {  // only when some: cases without have none
                final ArrayNode headers = line.putArray("headers");
                for (final Header h : r.headers()) {
                    headers.addArray().add(h.key()).add(ByteCompat.hex(h.value()));
                }
            }
        }
    }

    static void putKey(final ObjectNode line, final Object key) {
        if (key instanceof Windowed<?> w) {
            line.put("key", (String) w.key());
            final ArrayNode window = line.putArray("window");
            window.add(w.window().start());
            window.add(w.window().end());
        } else {
            line.put("key", (String) key);
            line.putNull("window");
        }
    }

    static void putValue(final ObjectNode line, final Object value) {
        if (value == null) {
            line.putNull("value");
        } else if (value instanceof Long l) {
            line.put("value", l);
        } else {
            line.put("value", value.toString());
        }
    }

    @SuppressWarnings("unchecked")
    static void dumpStore(final TopologyTestDriver driver, final String name, final String kind,
                          final TreeSet<String> keys, final ArrayNode lines) {
        final List<ObjectNode> entries = new ArrayList<>();
        switch (kind) {
            case "session" -> {
                final SessionStore<String, Object> store = driver.getSessionStore(name);
                for (final String key : keys) {
                    try (KeyValueIterator<Windowed<String>, Object> it = store.fetch(key)) {
                        while (it.hasNext()) {
                            final KeyValue<Windowed<String>, Object> kv = it.next();
                            final ObjectNode e = storeEntry(name, kv.key, kv.value);
                            e.putNull("ts");
                            entries.add(e);
                        }
                    }
                }
            }
            case "window" -> {
                final WindowStore<String, ValueAndTimestamp<Object>> store = driver.getTimestampedWindowStore(name);
                try (KeyValueIterator<Windowed<String>, ValueAndTimestamp<Object>> it = store.all()) {
                    while (it.hasNext()) {
                        final KeyValue<Windowed<String>, ValueAndTimestamp<Object>> kv = it.next();
                        final ObjectNode e = storeEntry(name, kv.key, kv.value.value());
                        e.put("ts", kv.value.timestamp());
                        entries.add(e);
                    }
                }
            }
            case "versioned" -> {
                final VersionedKeyValueStore<String, Object> store = driver.getVersionedKeyValueStore(name);
                for (final String key : keys) {
                    final VersionedRecord<Object> latest = store.get(key);
                    if (latest != null) {
                        final ObjectNode e = storeEntry(name, key, latest.value());
                        e.put("ts", latest.timestamp());
                        entries.add(e);
                    }
                }
            }
            case "kv_ts" -> {
                final KeyValueStore<String, ValueAndTimestamp<Object>> store = driver.getTimestampedKeyValueStore(name);
                try (KeyValueIterator<String, ValueAndTimestamp<Object>> it = store.all()) {
                    while (it.hasNext()) {
                        final KeyValue<String, ValueAndTimestamp<Object>> kv = it.next();
                        final ObjectNode e = storeEntry(name, kv.key, kv.value.value());
                        e.put("ts", kv.value.timestamp());
                        entries.add(e);
                    }
                }
            }
            case "kv" -> {
                final KeyValueStore<String, Object> store = driver.getKeyValueStore(name);
                try (KeyValueIterator<String, Object> it = store.all()) {
                    while (it.hasNext()) {
                        final KeyValue<String, Object> kv = it.next();
                        final ObjectNode e = storeEntry(name, kv.key, kv.value);
                        e.putNull("ts");
                        entries.add(e);
                    }
                }
            }
            default -> throw new IllegalStateException("store kind " + kind);
        }
        // a canonical order (the stores' own iteration orders differ between store types)
        entries.sort(Comparator.comparing((ObjectNode e) -> e.get("key").asText())
            .thenComparingLong(e -> e.get("window").isNull() ? 0 : e.get("window").get(0).asLong())
            .thenComparingLong(e -> e.get("window").isNull() ? 0 : e.get("window").get(1).asLong()));
        entries.forEach(lines::add);
    }

    static ObjectNode storeEntry(final String store, final Object key, final Object value) {
        final ObjectNode e = NODES.objectNode();
        e.put("kind", "store");
        e.put("store", store);
        putKey(e, key);
        putValue(e, value);
        return e;
    }

    // -- shapes ----------------------------------------------------------------------------------

    @SuppressWarnings("unchecked")
    static <T> Serde<T> cast(final Serde<?> serde) {
        return (Serde<T>) serde;
    }

    static boolean stringOp(final String op) {
        return op.equals("concat") || op.equals("reduce_concat");
    }

    static Built build(final String shape, final Params p) {
        return switch (shape) {
            case "session" -> session(p);
            case "time_window" -> timeWindow(p, false);
            case "sliding" -> timeWindow(p, true);
            case "stream_aggregate" -> streamAggregate(p);
            case "table_aggregate" -> tableAggregate(p);
            case "punctuator" -> punctuator(p);
            case "stream_join", "stream_table_join", "global_join", "table_join", "fk_join" -> Joins.build(shape, p);
            case "branch", "repartition", "process_values", "timestamp_extractor", "cogroup", "table_ops",
                 "named", "grouping", "headers" ->
                Dsl.build(shape, p);
            default -> throw new CaseError("unknown shape '" + shape + "'");
        };
    }

    /** The user functions of each op (tests/oracle/README.md). */
    static final Initializer<Object> ZERO = () -> 0L;
    static final Initializer<Object> EMPTY = () -> "";
    static final Aggregator<String, Object, Object> SUM = (k, v, agg) -> v == null ? agg : (Long) agg + (Long) v;
    static final Aggregator<String, Object, Object> CONCAT = (k, v, agg) -> (String) agg + v;
    static final Merger<String, Object> MERGE_SUM = (k, a, b) -> (Long) a + (Long) b;
    static final Merger<String, Object> MERGE_CONCAT = (k, a, b) -> (String) a + b;
    static final Reducer<Object> REDUCE_SUM = (a, b) -> b == null ? a : (Long) a + (Long) b;
    static final Reducer<Object> REDUCE_MAX = (a, b) -> b == null ? a : (Object) Math.max((Long) a, (Long) b);
    static final Reducer<Object> REDUCE_CONCAT = (a, b) -> (String) a + b;

    static Reducer<Object> reducer(final Params p, final String op) {
        final Reducer<Object> r = switch (op) {
            case "reduce_sum" -> REDUCE_SUM;
            case "reduce_max" -> REDUCE_MAX;
            case "reduce_concat" -> REDUCE_CONCAT;
            default -> throw new IllegalStateException(op);
        };
        return (a, b) -> misbehaves(p, b) ? null : r.apply(a, b);
    }

    /** {@code base} returning null on the case's "none_on" value, failing on its "raise_on". */
    static Aggregator<String, Object, Object> aggregator(final Params p, final Aggregator<String, Object, Object> base) {
        return (k, v, agg) -> misbehaves(p, v) ? null : base.apply(k, v, agg);
    }

    /** Whether a user function given {@code value} returns null ("none_on"); throws on "raise_on". */
    static boolean misbehaves(final Params p, final Object value) {
        return misbehaves(p, "", value);
    }

    /** As {@link #misbehaves(Params, Object)} for the parameters {@code prefix + "none_on"} / {@code "raise_on"}. */
    static boolean misbehaves(final Params p, final String prefix, final Object value) {
        if (matches(p, prefix + "raise_on", value)) {
            throw new UserFunctionError(value);
        }
        return matches(p, prefix + "none_on", value);
    }

    /**
     * The session merger {@code base}, returning null when an aggregate it is given (the one
     * merged so far, from the initializer, then the stored session's) is "merger_none_on" and
     * failing on "merger_raise_on"; with either set, a null
     * aggregate (what such a merger returned) counts as 0 in {@code sum}'s merger and aggregator
     * (Java's concatenation prints it as "null").
     */
    static Merger<String, Object> merger(final Params p, final Merger<String, Object> base) {
        if (!p.has("merger_none_on") && !p.has("merger_raise_on")) {
            return base;
        }
        return (k, a, b) -> misbehaves(p, "merger_", a) || misbehaves(p, "merger_", b) ? null : base.apply(k, a == null && base == MERGE_SUM ? (Object) 0L : a, b);
    }

    /** The session aggregator of {@code sum} reading a null aggregate as 0 when the merger misbehaves ({@link #merger}). */
    static Aggregator<String, Object, Object> sessionAggregator(final Params p, final Aggregator<String, Object, Object> base) {
        if (base != SUM || !p.has("merger_none_on") && !p.has("merger_raise_on")) {
            return aggregator(p, base);
        }
        return aggregator(p, (k, v, agg) -> base.apply(k, v, agg == null ? (Object) 0L : agg));
    }

    static boolean matches(final Params p, final String name, final Object value) {
        if (!p.has(name) || value == null) {
            return false;
        }
        final JsonNode v = p.node.get(name);
        return value instanceof Long l ? v.isIntegralNumber() && v.asLong() == l : v.isTextual() && v.asText().equals(value);
    }

    static Serde<Object> inputSerde(final String op) {
        return cast(stringOp(op) ? Serdes.String() : Serdes.Long());
    }

    static Serde<Object> aggSerde(final String op) {
        return cast(stringOp(op) ? Serdes.String() : Serdes.Long());
    }

    static <S extends org.apache.kafka.streams.processor.StateStore> Materialized<String, Object, S> materialized(
            final Params p, final String op, final boolean windowed) {
        Materialized<String, Object, S> m = (p.bool("store_named", true)
            ? Materialized.<String, Object, S>as("store") : Materialized.<String, Object, S>with(null, null))
            .withKeySerde(Serdes.String())
            .withValueSerde(aggSerde(op));
        m = p.bool("caching", true) ? m.withCachingEnabled() : m.withCachingDisabled();
        if (windowed && p.has("retention")) {
            m = m.withRetention(Duration.ofMillis(p.ms("retention", null, 0)));
        }
        return m;
    }

    static KGroupedStream<String, Object> groupedStream(final StreamsBuilder builder, final Serde<Object> valueSerde) {
        return builder.stream("in", Consumed.with(Serdes.String(), valueSerde))
            .groupByKey(Grouped.with(Serdes.String(), valueSerde));
    }

    @SuppressWarnings("unchecked")
    static <K> KTable<K, Object> maybeSuppress(final Params p, final KTable<K, Object> table, final boolean windowed) {
        if (!p.has("suppress")) {
            return table;
        }
        final JsonNode s = p.node.get("suppress");
        final JsonNode type = s.get("type");
        if (!s.isObject() || type == null) {
            throw new CaseError("parameter 'suppress' of shape '" + p.shape + "' must be {\"type\": \"window_close\" | \"time_limit\", ...}, got " + s);
        }
        final Iterator<String> names = s.fieldNames();
        while (names.hasNext()) {
            final String n = names.next();
            if (!Set.of("type", "limit", "max_records").contains(n)) {
                throw new CaseError("unknown suppress parameter '" + n + "' (known: type, limit, max_records)");
            }
        }
        switch (type.asText()) {
            case "window_close" -> {
                if (!windowed) {
                    throw new CaseError("suppress type 'window_close' needs a windowed shape, not '" + p.shape + "'");
                }
                return (KTable<K, Object>) (KTable<?, ?>) ((KTable<Windowed<?>, Object>) (KTable<?, ?>) table)
                    .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()));
            }
            case "time_limit" -> {
                final JsonNode limit = s.get("limit");
                if (limit == null || !limit.isIntegralNumber() || limit.asLong() < 0) {
                    throw new CaseError("suppress type 'time_limit' needs an integer 'limit' >= 0, got " + limit);
                }
                final JsonNode max = s.get("max_records");
                final Suppressed.BufferConfig<?> buffer = max == null || max.isNull()
                    ? Suppressed.BufferConfig.unbounded()
                    : Suppressed.BufferConfig.maxRecords(max.asLong());
                return table.suppress(Suppressed.untilTimeLimit(Duration.ofMillis(limit.asLong()), buffer));
            }
            default -> throw new CaseError("unknown suppress type " + type + " (known: time_limit, window_close)");
        }
    }

    static boolean emitClose(final Params p) {
        return p.choice("emit", "update", Set.of("update", "close")).equals("close");
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static Built session(final Params p) {
        final String op = p.choice("op", null, VALUE_OPS);
        final long gap = p.ms("gap", null, 0);
        final long grace = p.ms("grace", 0L, 0);
        if ((p.has("merger_none_on") || p.has("merger_raise_on")) && !op.equals("sum") && !op.equals("concat")) {
            throw new CaseError("the session merger's parameters need op 'sum' or 'concat', not '" + op + "'");
        }
        final SessionWindows windows = grace == 0
            ? SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMillis(gap))
            : SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(gap), Duration.ofMillis(grace));
        final StreamsBuilder builder = new StreamsBuilder();
        final Serde<Object> in = inputSerde(op);
        SessionWindowedKStream<String, Object> w = groupedStream(builder, in).windowedBy(windows);
        if (emitClose(p)) {
            w = w.emitStrategy(EmitStrategy.onWindowClose());
        }
        final Materialized<String, Object, SessionStore<Bytes, byte[]>> m = materialized(p, op, true);
        final KTable<Windowed<String>, Object> table = switch (op) {
            case "count" -> (KTable) w.count((Materialized) m);
            case "sum" -> w.aggregate(ZERO, sessionAggregator(p, SUM), merger(p, MERGE_SUM), m);
            case "concat" -> w.aggregate(EMPTY, sessionAggregator(p, CONCAT), merger(p, MERGE_CONCAT), m);
            default -> w.reduce(reducer(p, op), m);
        };
        maybeSuppress(p, table, true).toStream()
            .to("out", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), aggSerde(op)));
        final Built b = new Built();
        b.topology = builder.build();
        b.inputValueSerde = in;
        b.outputKeyDeserializer = new SessionWindowedDeserializer<>(new StringDeserializer());
        b.outputValueDeserializer = aggSerde(op).deserializer();
        b.stores.put(aggregateStore(b.topology, p), "session");
        b.windowedOutput = true;
        return b;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static Built timeWindow(final Params p, final boolean sliding) {
        final String op = p.choice("op", null, VALUE_OPS);
        final long grace = p.ms("grace", 0L, 0);
        final StreamsBuilder builder = new StreamsBuilder();
        final Serde<Object> in = inputSerde(op);
        final KGroupedStream<String, Object> grouped = groupedStream(builder, in);
        final long size;
        TimeWindowedKStream<String, Object> w;
        if (sliding) {
            final long diff = p.ms("diff", null, 1);
            size = diff;
            w = grouped.windowedBy(grace == 0
                ? SlidingWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(diff))
                : SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(diff), Duration.ofMillis(grace)));
        } else {
            size = p.ms("size", null, 1);
            final long advance = p.ms("advance", size, 1);
            if (advance > size) {
                throw new CaseError("parameter 'advance' of shape 'time_window' must be <= size (" + size + "), got " + advance);
            }
            TimeWindows windows = grace == 0
                ? TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(size))
                : TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace));
            if (advance != size) {
                windows = windows.advanceBy(Duration.ofMillis(advance));
            }
            w = grouped.windowedBy(windows);
        }
        if (emitClose(p)) {
            w = w.emitStrategy(EmitStrategy.onWindowClose());
        }
        final Materialized<String, Object, WindowStore<Bytes, byte[]>> m = materialized(p, op, true);
        final KTable<Windowed<String>, Object> table = switch (op) {
            case "count" -> (KTable) w.count((Materialized) m);
            case "sum" -> w.aggregate(ZERO, aggregator(p, SUM), m);
            case "concat" -> w.aggregate(EMPTY, aggregator(p, CONCAT), m);
            default -> w.reduce(reducer(p, op), m);
        };
        maybeSuppress(p, table, true).toStream()
            .to("out", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, size), aggSerde(op)));
        final Built b = new Built();
        b.topology = builder.build();
        b.inputValueSerde = in;
        b.outputKeyDeserializer = new TimeWindowedDeserializer<>(new StringDeserializer(), size);
        b.outputValueDeserializer = aggSerde(op).deserializer();
        b.stores.put(aggregateStore(b.topology, p), "window");
        b.windowedOutput = true;
        return b;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static Built streamAggregate(final Params p) {
        final String op = p.choice("op", null, VALUE_OPS);
        final StreamsBuilder builder = new StreamsBuilder();
        final Serde<Object> in = inputSerde(op);
        final KGroupedStream<String, Object> grouped = groupedStream(builder, in);
        final Materialized<String, Object, KeyValueStore<Bytes, byte[]>> m = materialized(p, op, false);
        final KTable<String, Object> table = switch (op) {
            case "count" -> (KTable) grouped.count((Materialized) m);
            case "sum" -> grouped.aggregate(ZERO, aggregator(p, SUM), m);
            case "concat" -> grouped.aggregate(EMPTY, aggregator(p, CONCAT), m);
            default -> grouped.reduce(reducer(p, op), m);
        };
        maybeSuppress(p, table, false).toStream().to("out", Produced.with(Serdes.String(), aggSerde(op)));
        final Built b = new Built();
        b.topology = builder.build();
        b.inputValueSerde = in;
        b.outputKeyDeserializer = new StringDeserializer();
        b.outputValueDeserializer = aggSerde(op).deserializer();
        b.stores.put(aggregateStore(b.topology, p), "kv_ts");
        return b;
    }

    /** The aggregation's store: "store", or the name Kafka Streams generated ("store_named": false). */
    static String aggregateStore(final Topology topology, final Params p) {
        if (p.bool("store_named", true)) {
            return "store";
        }
        for (final TopologyDescription.Subtopology sub : topology.describe().subtopologies()) {
            for (final TopologyDescription.Node node : sub.nodes()) {
                if (node instanceof TopologyDescription.Processor proc
                        && proc.name().matches("K(STREAM|TABLE)-(AGGREGATE|REDUCE)-\\d+")) {
                    return proc.stores().iterator().next();
                }
            }
        }
        throw new IllegalStateException("no aggregation store in " + topology.describe());
    }

    /** The group of a table row: "g" + floorMod(value, groups), so a new value can move the row. */
    static String group(final long value, final long groups) {
        return "g" + Math.floorMod(value, groups);
    }

    /** The table shape's mapper: (group, v), or (v, v) with the Long v as key for "int_key_on". */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static KeyValue<String, Long> regroup(final Long v, final long groups, final Long intKeyOn) {
        return v.equals(intKeyOn) ? (KeyValue) KeyValue.pair(v, v) : KeyValue.pair(group(v, groups), v);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static Built tableAggregate(final Params p) {
        final String op = p.choice("op", null, Set.of("sum", "count", "reduce_sum"));
        final long groups = p.ms("groups", 3L, 1);
        // a value whose group is the value itself, a Long where the repartition topic's key serde
        // is a String one
        final Long intKeyOn = p.has("int_key_on") ? p.node.get("int_key_on").asLong() : null;
        final StreamsBuilder builder = new StreamsBuilder();
        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> source = Materialized
            .<String, Long, KeyValueStore<Bytes, byte[]>>as("source")
            .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long());
        source = p.bool("source_caching", true) ? source.withCachingEnabled() : source.withCachingDisabled();
        final KGroupedTable<String, Long> grouped = builder
            .table("in", Consumed.with(Serdes.String(), Serdes.Long()), source)
            .groupBy((k, v) -> regroup(v, groups, intKeyOn), Grouped.with(Serdes.String(), Serdes.Long()));
        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> m = (p.bool("store_named", true)
            ? Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("store")
            : Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>with(null, null))
            .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long());
        m = p.bool("caching", true) ? m.withCachingEnabled() : m.withCachingDisabled();
        final KTable<String, Long> table = switch (op) {
            // the adder returns null on "none_on", fails on "raise_on"; the subtractor likewise on
            // "subtractor_none_on" / "subtractor_raise_on"
            case "sum" -> grouped.aggregate(() -> 0L, (k, v, agg) -> misbehaves(p, v) ? null : (Long) (agg + v),
                (k, v, agg) -> misbehaves(p, "subtractor_", v) ? null : (Long) (agg - v), m);
            case "count" -> grouped.count(m);
            default -> grouped.reduce((a, b) -> misbehaves(p, b) ? null : (Long) (a + b),
                (a, b) -> misbehaves(p, "subtractor_", b) ? null : (Long) (a - b), m);
        };
        table.toStream().to("out", Produced.with(Serdes.String(), Serdes.Long()));
        final Built b = new Built();
        b.topology = builder.build();
        b.inputValueSerde = cast(Serdes.Long());
        b.outputKeyDeserializer = new StringDeserializer();
        b.outputValueDeserializer = Serdes.Long().deserializer();
        b.stores.put("source", "kv_ts");
        b.stores.put(aggregateStore(b.topology, p), "kv_ts");
        return b;
    }

    /**
     * A processor keeping a running sum per key in the store "store": each record (k, v) adds v
     * to k's sum and forwards (k, sum); a null value deletes k and forwards (k, null); a null
     * key is ignored. A STREAM_TIME punctuator forwards ("@stream", total of all sums) and a
     * WALL_CLOCK_TIME one ("@wall", total), each with the punctuation time as timestamp; each
     * cancels itself after *_cancel_after fires when that is set, and fails at its *_raise_at-th
     * fire (before forwarding) when that is set.
     */
    static final class SumProcessor implements Processor<String, Long, String, Long> {
        final Long streamInterval;
        final Long wallInterval;
        final Long streamCancelAfter;
        final Long wallCancelAfter;
        final Long streamRaiseAt;
        final Long wallRaiseAt;
        ProcessorContext<String, Long> context;
        KeyValueStore<String, Long> store;
        long streamFires;
        long wallFires;
        Cancellable streamSchedule;
        Cancellable wallSchedule;

        SumProcessor(final Long streamInterval, final Long wallInterval, final Long streamCancelAfter, final Long wallCancelAfter,
                     final Long streamRaiseAt, final Long wallRaiseAt) {
            this.streamInterval = streamInterval;
            this.wallInterval = wallInterval;
            this.streamCancelAfter = streamCancelAfter;
            this.wallCancelAfter = wallCancelAfter;
            this.streamRaiseAt = streamRaiseAt;
            this.wallRaiseAt = wallRaiseAt;
        }

        @Override
        public void init(final ProcessorContext<String, Long> context) {
            this.context = context;
            this.store = context.getStateStore("store");
            if (streamInterval != null) {
                streamSchedule = context.schedule(Duration.ofMillis(streamInterval), PunctuationType.STREAM_TIME, ts -> {
                    streamFires++;
                    if (streamRaiseAt != null && streamFires == streamRaiseAt) {
                        throw new UserFunctionError("@stream punctuation " + streamFires);
                    }
                    context.forward(new Record<>("@stream", total(), ts));
                    if (streamCancelAfter != null && streamFires >= streamCancelAfter) {
                        streamSchedule.cancel();
                    }
                });
            }
            if (wallInterval != null) {
                wallSchedule = context.schedule(Duration.ofMillis(wallInterval), PunctuationType.WALL_CLOCK_TIME, ts -> {
                    wallFires++;
                    if (wallRaiseAt != null && wallFires == wallRaiseAt) {
                        throw new UserFunctionError("@wall punctuation " + wallFires);
                    }
                    context.forward(new Record<>("@wall", total(), ts));
                    if (wallCancelAfter != null && wallFires >= wallCancelAfter) {
                        wallSchedule.cancel();
                    }
                });
            }
        }

        long total() {
            long sum = 0;
            try (KeyValueIterator<String, Long> it = store.all()) {
                while (it.hasNext()) {
                    sum += it.next().value;
                }
            }
            return sum;
        }

        @Override
        public void process(final Record<String, Long> record) {
            if (record.key() == null) {
                return;
            }
            if (record.value() == null) {
                store.delete(record.key());
                context.forward(record.withValue(null));
                return;
            }
            final Long old = store.get(record.key());
            final long sum = (old == null ? 0 : old) + record.value();
            store.put(record.key(), sum);
            context.forward(record.withValue(sum));
        }
    }

    static Built punctuator(final Params p) {
        final Long streamInterval = p.optMs("stream_interval", 1);
        final Long wallInterval = p.optMs("wall_interval", 1);
        final Long streamCancelAfter = p.optMs("stream_cancel_after", 1);
        final Long wallCancelAfter = p.optMs("wall_cancel_after", 1);
        final Long streamRaiseAt = p.optMs("stream_raise_at", 1);
        final Long wallRaiseAt = p.optMs("wall_raise_at", 1);
        final Topology topology = new Topology();
        topology.addSource("source", Serdes.String().deserializer(), Serdes.Long().deserializer(), "in");
        topology.addProcessor("sum",
            () -> new SumProcessor(streamInterval, wallInterval, streamCancelAfter, wallCancelAfter, streamRaiseAt, wallRaiseAt), "source");
        final var store = Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("store"), Serdes.String(), Serdes.Long());
        topology.addStateStore(p.bool("caching", false) ? store.withCachingEnabled() : store, "sum");
        topology.addSink("sink", "out", Serdes.String().serializer(), Serdes.Long().serializer(), "sum");
        final Built b = new Built();
        b.topology = topology;
        b.inputValueSerde = cast(Serdes.Long());
        b.outputKeyDeserializer = new StringDeserializer();
        b.outputValueDeserializer = Serdes.Long().deserializer();
        b.stores.put("store", "kv");
        return b;
    }
}
