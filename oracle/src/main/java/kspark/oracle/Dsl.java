package kspark.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.BranchedKStream;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.CogroupedKStream;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Predicate;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.KeyValueMapper;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindowedDeserializer;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.ValueMapper;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.TimeWindowedDeserializer;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.ValueTransformerWithKey;
import org.apache.kafka.streams.kstream.ValueTransformerWithKeySupplier;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.processor.ProcessorContext;
import org.apache.kafka.streams.processor.TimestampExtractor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.TreeMap;

import kspark.oracle.Oracle.Built;
import kspark.oracle.Oracle.CaseError;
import kspark.oracle.Oracle.Params;

/**
 * The oracle's shapes of the DSL's stateless operators (tests/oracle/README.md).
 *
 * <p>{@code branch}: {@code split(prefix)} of the Long stream "in" with the given branches and
 * default branch; every branch of the resulting map writes {@code "<branch name>:<value>"} to
 * "out" (String keys and values), so the output shows which branch each record took and the
 * branch names Kafka Streams gives. {@code repartition}: see {@link #repartition}.
 */
final class Dsl {

    /** The shapes and their parameters (besides {@link Oracle#COMMON}). */
    static final Map<String, Set<String>> SHAPES = new LinkedHashMap<>();

    static {
        SHAPES.put("branch", Set.of("prefix", "branches", "default"));
        SHAPES.put("repartition", Set.of("rekey", "name", "partitions", "caching", "none_on", "int_key_on", "raise_on"));
        SHAPES.put("process_values", Set.of("rekey", "caching", "raise_on"));
        SHAPES.put("timestamp_extractor", Set.of("grace"));
        SHAPES.put("cogroup", Set.of("rekey_b", "named", "caching", "windows", "grace", "size", "retention", "none_on", "raise_on"));
        SHAPES.put("named", Set.of("names", "parts", "kinds", "store_names", "rekey_right"));
        SHAPES.put("grouping", Set.of("by", "grouped_name", "caching", "counts_named", "agg_names", "int_key_on"));
        SHAPES.put("table_ops", Set.of("source", "source_named", "caching", "operation", "op_materialized", "op_caching",
            "op_unnamed", "op_named", "none_on", "raise_on"));
        SHAPES.put("headers", HeaderShape.PARAMS);
    }

    static final Set<String> CHAINS = Set.of("none", "map", "consume", "drop");

    private Dsl() {
    }

    static Built build(final String shape, final Params p) {
        return switch (shape) {
            case "branch" -> branch(p);
            case "repartition" -> repartition(p);
            case "process_values" -> processValues(p);
            case "timestamp_extractor" -> timestampExtractor(p);
            case "cogroup" -> cogroup(p);
            case "table_ops" -> tableOps(p);
            case "named" -> NamedShape.build(p);
            case "grouping" -> grouping(p);
            case "headers" -> HeaderShape.build(p);
            default -> throw new CaseError("unknown DSL shape '" + shape + "'");
        };
    }

    /**
     * {@code stream("in")[.selectKey((k, v) -> v == null ? null : k + floorMod(v, 2))]
     * .repartition([Repartitioned.as(name)][.withNumberOfPartitions(n)]).groupByKey()
     * .count(Materialized.as("counts")).toStream().to("out")}, String keys and Long counts.
     */
    static Built repartition(final Params p) {
        final StreamsBuilder builder = new StreamsBuilder();
        final KStream<String, Long> source = builder.stream("in", Consumed.with(Serdes.String(), Serdes.Long()));
        // "int_key_on": the value itself as the key, a Long where the repartition topic's key serde
        // is a String one (its serializer fails); "none_on": a null key; "raise_on": the selector fails
        final Long intKeyOn = p.has("int_key_on") ? p.node.get("int_key_on").asLong() : null;
        @SuppressWarnings({"unchecked", "rawtypes"})
        final KeyValueMapper<String, Long, String> selector = (KeyValueMapper) (KeyValueMapper<String, Long, Object>)
            (k, v) -> v == null || Oracle.misbehaves(p, v) ? null : v.equals(intKeyOn) ? v : k + Math.floorMod(v, 2);
        final KStream<String, Long> in = p.bool("rekey", false) ? source.selectKey(selector) : source;
        final String name = Joins.optString(p, "name");
        final Long partitions = p.optMs("partitions", 1);
        Repartitioned<String, Long> repartitioned = name == null
            ? Repartitioned.with(Serdes.String(), Serdes.Long())
            : Repartitioned.<String, Long>as(name).withKeySerde(Serdes.String()).withValueSerde(Serdes.Long());
        if (partitions != null) {
            repartitioned = repartitioned.withNumberOfPartitions(partitions.intValue());
        }
        in.repartition(repartitioned).groupByKey().count(counts(p))
            .toStream().to("out", Produced.with(Serdes.String(), Serdes.Long()));
        final Built built = built(builder, List.of("in"), new StringDeserializer(), new LongDeserializer());
        built.stores.put("counts", "kv_ts");
        return built;
    }

    /** A shape's topology with its input topics, Long input values and "out"'s deserializers. */
    static Built built(final StreamsBuilder builder, final List<String> inputs,
                       final Deserializer<?> keys, final Deserializer<?> values) {
        final Built built = new Built();
        built.topology = builder.build();
        built.inputTopics = inputs;
        built.inputValueSerde = Oracle.cast(Serdes.Long());
        built.outputKeyDeserializer = keys;
        built.outputValueDeserializer = values;
        return built;
    }

    /** With {@code rekey}: {@code selectKey((k, v) -> v == null ? null : k + floorMod(v, 2))}. */
    static KStream<String, Long> maybeRekey(final Params p, final KStream<String, Long> in) {
        return p.bool("rekey", false) ? in.selectKey((k, v) -> v == null ? null : k + Math.floorMod(v, 2)) : in;
    }

    /** {@code Materialized.as("counts")} with caching as {@code caching} says (default on). */
    static Materialized<String, Long, KeyValueStore<Bytes, byte[]>> counts(final Params p) {
        final Materialized<String, Long, KeyValueStore<Bytes, byte[]>> m = Materialized.as("counts");
        return p.bool("caching", true) ? m.withCachingEnabled() : m.withCachingDisabled();
    }

    /**
     * A branch is {@code {"pred": {"mod": m, "rem": r} | {"null": true} | {"key": k}, "name": s?,
     * "chain": "none" | "map" | "consume" | "drop"}}; {@code "default"} is absent or null (no
     * default branch) or {@code {"name": s?, "chain": ...}}. Chains: "map" is
     * {@code Branched.withFunction(s -> s.mapValues(v -> v * 10))} (null stays null), "consume"
     * {@code Branched.withConsumer(s -> s.mapValues(v -> "consumed:" + v).to("out"))}, "drop"
     * {@code Branched.withFunction(s -> null)}.
     */
    static Built branch(final Params p) {
        final StreamsBuilder builder = new StreamsBuilder();
        final KStream<String, Long> in = builder.stream("in", Consumed.with(Serdes.String(), Serdes.Long()));
        final String prefix = Joins.optString(p, "prefix");
        BranchedKStream<String, Long> split = prefix == null ? in.split() : in.split(Named.as(prefix));
        final JsonNode branches = p.node.get("branches");
        if (branches == null || !branches.isArray()) {
            throw new CaseError("shape 'branch' needs parameter 'branches' (a list)");
        }
        for (final JsonNode b : branches) {
            final Branched<String, Long> branched = branched(b);
            split = branched == null ? split.branch(predicate(b.get("pred")))
                : split.branch(predicate(b.get("pred")), branched);
        }
        final JsonNode dflt = p.node.get("default");
        final Map<String, KStream<String, Long>> result;
        if (dflt == null || dflt.isNull()) {
            result = split.noDefaultBranch();
        } else {
            final Branched<String, Long> branched = branched(dflt);
            result = branched == null ? split.defaultBranch() : split.defaultBranch(branched);
        }
        // wired in name order: the output does not depend on it, the generated names after it do
        for (final Map.Entry<String, KStream<String, Long>> e : new TreeMap<>(result).entrySet()) {
            final String name = e.getKey();
            e.getValue().mapValues(v -> name + ":" + v).to("out", Produced.with(Serdes.String(), Serdes.String()));
        }
        return built(builder, List.of("in"), new StringDeserializer(), new StringDeserializer());
    }

    /**
     * {@code stream("in")[.selectKey(...) as in repartition].processValues(Doubling)
     * .groupByKey().count(Materialized.as("counts")).toStream().to("out")}: the fixed-key
     * processor forwards {@code v * 2} at the record's timestamp + 1, and for an odd value
     * also {@code v} itself; a null value it forwards as is. No repartition after it unless
     * the stream was re-keyed before.
     */
    static Built processValues(final Params p) {
        final StreamsBuilder builder = new StreamsBuilder();
        maybeRekey(p, builder.stream("in", Consumed.with(Serdes.String(), Serdes.Long())))
            .processValues(() -> new Doubling(p.has("raise_on") ? p.node.get("raise_on").asLong() : null)).groupByKey(Grouped.with(Serdes.String(), Serdes.Long())).count(counts(p))
            .toStream().to("out", Produced.with(Serdes.String(), Serdes.Long()));
        final Built built = built(builder, List.of("in"), new StringDeserializer(), new LongDeserializer());
        built.stores.put("counts", "kv_ts");
        return built;
    }

    /**
     * {@code stream("in", Consumed...withTimestampExtractor(ValueOrPartitionTime))
     * .groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10, grace)).count(Materialized.as("store")
     * .withCachingDisabled()).toStream().to("out")}: each record's timestamp is its value, or
     * the partition time for a null value (negative ones are dropped).
     */
    static Built timestampExtractor(final Params p) {
        final StreamsBuilder builder = new StreamsBuilder();
        final long grace = p.ms("grace", 0L, 0);
        final Materialized<String, Long, WindowStore<Bytes, byte[]>> m =
            Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("store").withCachingDisabled();
        builder.stream("in", Consumed.with(Serdes.String(), Serdes.Long())
                .withTimestampExtractor(new ValueOrPartitionTime()))
            .groupByKey()
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(10), Duration.ofMillis(grace)))
            .count(m)
            .toStream()
            .to("out", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 10), Serdes.Long()));
        final Built built = built(builder, List.of("in"),
            new TimeWindowedDeserializer<>(new StringDeserializer(), 10L), new LongDeserializer());
        built.windowedOutput = true;
        return built;
    }

    /**
     * {@code stream("a").groupByKey().cogroup((k, v, agg) -> agg + v).cogroup(stream("b")
     * [.selectKey((k, v) -> k)].groupByKey(), (k, v, agg) -> agg * 2 - v)[.windowedBy(windows of
     * 10 ms with grace)].aggregate(() -> 0[, (k, x, y) -> x + y for sessions],
     * Materialized[.as("store")]).toStream().to("out")}, String keys and Long values; a windowed
     * store keeps {@link #WINDOWED_RETENTION}.
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static Built cogroup(final Params p) {
        final StreamsBuilder builder = new StreamsBuilder();
        final Grouped<String, Long> grouped = Grouped.with(Serdes.String(), Serdes.Long());
        final KGroupedStream<String, Long> a = builder.stream("a", Consumed.with(Serdes.String(), Serdes.Long()))
            .groupByKey(grouped);
        KStream<String, Long> b = builder.stream("b", Consumed.with(Serdes.String(), Serdes.Long()));
        if (p.bool("rekey_b", false)) {
            b = b.selectKey((k, v) -> k);
        }
        final boolean named = p.bool("named", true);
        final String windows = p.choice("windows", "none", Set.of("none", "time", "sliding", "session"));
        final long grace = p.ms("grace", 0L, 0);
        final long size = p.ms("size", 10L, 1); // window size, time difference or inactivity gap
        Materialized m = named ? Materialized.as("store") : Materialized.with(Serdes.String(), Serdes.Long());
        m = m.withKeySerde(Serdes.String()).withValueSerde(Serdes.Long());
        m = p.bool("caching", true) ? m.withCachingEnabled() : m.withCachingDisabled();
        if (!windows.equals("none")) {
            m = m.withRetention(Duration.ofMillis(p.ms("retention", WINDOWED_RETENTION, 0)));
        }
        // windowed aggregations pass null values on (a plain one drops them): null adds nothing
        // stream a's aggregator returns null on "none_on", fails on "raise_on" (Oracle#misbehaves)
        final CogroupedKStream<String, Long> cogrouped = a.<Long>cogroup(
                (k, v, agg) -> Oracle.misbehaves(p, v) ? null : v == null ? agg : (Long) (agg + v))
            .cogroup(b.groupByKey(grouped), (k, v, agg) -> v == null ? agg + 1000 : agg * 2 - v);
        Deserializer<?> keys = new StringDeserializer();
        switch (windows) {
            case "none" -> cogrouped.aggregate(() -> 0L, m)
                .toStream().to("out", Produced.with(Serdes.String(), Serdes.Long()));
            case "session" -> {
                cogrouped.windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace)))
                    .aggregate(() -> 0L, (k, x, y) -> x + y, m)
                    .toStream().to("out", Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.Long()));
                keys = new SessionWindowedDeserializer<>(new StringDeserializer());
            }
            default -> {
                final KTable<Windowed<String>, Long> table = windows.equals("time")
                    ? cogrouped.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace)))
                        .aggregate(() -> 0L, m)
                    : cogrouped.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace)))
                        .aggregate(() -> 0L, m);
                table.toStream().to("out", Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, size), Serdes.Long()));
                keys = new TimeWindowedDeserializer<>(new StringDeserializer(), size);
            }
        }
        final Built built = built(builder, List.of("a", "b"), keys, new LongDeserializer());
        built.windowedOutput = !windows.equals("none");
        if (named && windows.equals("none")) {
            built.stores.put("store", "kv_ts");
        }
        return built;
    }

    /**
     * {@code {"request": "describe", "topology": "sessions_example" | "join_and_branch"}}: one
     * line {@code {"kind": "describe", "text": ...}} with the description of an application's
     * topology built in Java, as tests/dsl/test_describe_kafka_streams.py builds it in Python.
     */
    static ArrayNode describe(final JsonNode doc) {
        final String name = ByteCompat.need(doc, "topology").asText();
        final StreamsBuilder builder = new StreamsBuilder();
        switch (name) {
            case "sessions_example" -> {
                // kspark/examples/sessions.py
                final SessionWindowedKStream<String, String> sessions = builder
                    .stream("clicks", Consumed.with(Serdes.String(), Serdes.String()))
                    .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                    .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(10)))
                    .emitStrategy(EmitStrategy.onWindowClose());
                sessions.count(Materialized.as("session-counts")).toStream().to("session-counts");
                sessions.aggregate(() -> "", (k, v, agg) -> agg + v, (k, x, y) -> x + y,
                        Materialized.<String, String, SessionStore<Bytes, byte[]>>as("session-pages"))
                    .toStream().to("session-pages");
            }
            case "join_and_branch" -> {
                final KStream<String, String> impressions = builder.stream("impressions");
                final KStream<String, String> clicks = builder.stream("clicks");
                final KTable<String, String> campaigns = builder.table("campaigns", Materialized.as("campaigns"));
                final Map<String, KStream<String, String>> branches = impressions
                    .leftJoin(clicks, (i, c) -> i + "+" + c,
                        JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMinutes(10), Duration.ofMinutes(1)))
                    .join(campaigns, (v, c) -> v + "@" + c)
                    .split(Named.as("attributed-"))
                    .branch((k, v) -> v.contains("+null"), Branched.as("unclicked"))
                    .defaultBranch(Branched.as("clicked"));
                branches.get("attributed-clicked").to("clicked");
                branches.get("attributed-unclicked").groupByKey().count(Materialized.as("unclicked-counts"))
                    .toStream().to("unclicked-counts");
            }
            case "global_stores_and_transform" -> {
                // tests/oracle/test_describe.py: a named and an unnamed global store, a table's
                // values transformed (named, materialized), a stream written out
                builder.addGlobalStore(
                    Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore("prices"), Serdes.String(), Serdes.Long()),
                    "prices", Consumed.with(Serdes.String(), Serdes.Long()).withName("price-updates"), StoreWriter::new);
                builder.addGlobalStore(
                    Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore("rates"), Serdes.String(), Serdes.Long()),
                    "rates", Consumed.with(Serdes.String(), Serdes.Long()), StoreWriter::new);
                builder.table("accounts", Consumed.with(Serdes.String(), Serdes.Long()))
                    .transformValues(TAGGED, Materialized.as("tagged"), Named.as("tag"))
                    .toStream().to("tagged");
                builder.stream("clicks").to("out");
            }
            default -> throw new CaseError("unknown topology '" + name
                + "' (known: global_stores_and_transform, join_and_branch, sessions_example)");
        }
        final ArrayNode lines = Oracle.NODES.arrayNode();
        lines.addObject().put("kind", "describe").put("text", builder.build().describe().toString());
        return lines;
    }

    /** A global store's processor: puts each record into the store it keeps. */
    static final class StoreWriter implements Processor<String, Long, Void, Void> {
        private KeyValueStore<String, Long> store;

        @Override
        public void init(final org.apache.kafka.streams.processor.api.ProcessorContext<Void, Void> context) {
            store = context.getStateStore(context.recordMetadata().map(m -> m.topic()).orElse("prices"));
        }

        @Override
        public void process(final Record<String, Long> record) {
            store.put(record.key(), record.value());
        }
    }

    /** The default retention of a windowed cogroup's store: nothing expires within a case. */
    static final long WINDOWED_RETENTION = 10_000_000L;

    /**
     * {@code table("in", Materialized[.as("source")])} (or {@code stream("in").toTable(...)} with
     * {@code source = "to_table"}), then {@code filter(v -> v % 2 == 0)}, {@code filterNot(...)}
     * {@code mapValues(v -> v * 10)} or {@code transformValues(TAGGED)}, materialized as "result" when asked, then
     * {@code toStream().to("out")}: what each forwards, tombstones included.
     */
    /**
     * The table_ops shape's value transformer (kspark_dsl.Tagged): a deleted row of key "a"
     * becomes -1 (deletes reach the transformer), a value divisible by 3 deletes the row, others
     * get 100 added.
     */
    static final ValueTransformerWithKeySupplier<String, Long, Long> TAGGED = () -> new ValueTransformerWithKey<>() {
        @Override
        public void init(final ProcessorContext context) { }

        @Override
        public Long transform(final String key, final Long value) {
            if (value == null) {
                return "a".equals(key) ? -1L : null;
            }
            return Math.floorMod(value, 3) == 0 ? null : value + 100;
        }

        @Override
        public void close() { }
    };

    static Built tableOps(final Params p) {
        final StreamsBuilder builder = new StreamsBuilder();
        final boolean sourceNamed = p.bool("source_named", false);
        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> sm = sourceNamed
            ? Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("source")
            : Materialized.with(Serdes.String(), Serdes.Long());
        sm = sm.withKeySerde(Serdes.String()).withValueSerde(Serdes.Long());
        sm = p.bool("caching", true) ? sm.withCachingEnabled() : sm.withCachingDisabled();
        final KTable<String, Long> table = p.choice("source", "table", Set.of("table", "to_table")).equals("table")
            ? builder.table("in", Consumed.with(Serdes.String(), Serdes.Long()), sm)
            : builder.stream("in", Consumed.with(Serdes.String(), Serdes.Long())).toTable(sm);
        final boolean opMaterialized = p.bool("op_materialized", false);
        // an unnamed Materialized: Kafka Streams keeps no store for it
        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> rm = p.bool("op_unnamed", false)
            ? Materialized.with(Serdes.String(), Serdes.Long())
            : Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("result")
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long());
        rm = p.bool("op_caching", true) ? rm.withCachingEnabled() : rm.withCachingDisabled();
        final Predicate<String, Long> even = (k, v) -> v != null && Math.floorMod(v, 2) == 0;
        final Named named = Named.as("n-op");
        // mapValues' mapper: null on "none_on", failing on "raise_on" (Oracle#misbehaves)
        final ValueMapper<Long, Long> times10 = v -> Oracle.misbehaves(p, v) ? null : (Long) (v * 10);
        final boolean opNamed = p.bool("op_named", false);
        final KTable<String, Long> result = switch (p.choice("operation", null, Set.of("filter", "filter_not", "map_values", "transform_values"))) {
            case "filter" -> opMaterialized ? (opNamed ? table.filter(even, named, rm) : table.filter(even, rm))
                : (opNamed ? table.filter(even, named) : table.filter(even));
            case "filter_not" -> opMaterialized ? (opNamed ? table.filterNot(even, named, rm) : table.filterNot(even, rm))
                : (opNamed ? table.filterNot(even, named) : table.filterNot(even));
            case "transform_values" -> opMaterialized
                ? (opNamed ? table.transformValues(TAGGED, rm, named) : table.transformValues(TAGGED, rm))
                : (opNamed ? table.transformValues(TAGGED, named) : table.transformValues(TAGGED));
            default -> opMaterialized
                ? (opNamed ? table.mapValues(times10, named, rm) : table.mapValues(times10, rm))
                : (opNamed ? table.mapValues(times10, named) : table.mapValues(times10));
        };
        (opNamed ? result.toStream(Named.as("n-to-stream")) : result.toStream())
            .to("out", Produced.with(Serdes.String(), Serdes.Long()));
        final Built built = built(builder, List.of("in"), new StringDeserializer(), new LongDeserializer());
        if (sourceNamed) {
            built.stores.put("source", "kv_ts");
        }
        if (opMaterialized && !p.bool("op_unnamed", false)) {
            built.stores.put("result", "kv_ts");
        }
        built.changelogStores = new TreeSet<>(built.stores.keySet());  // by name, as kspark's side
        return built;
    }

    /**
     * {@code stream("in")}, grouped by {@code groupBy((k, v) -> k + floorMod(v, 2))} or by
     * {@code selectKey(same).groupByKey()} ({@code by}), {@code Grouped.as(grouped_name)} or
     * not, then two aggregations of the grouping, {@code count(Materialized.as("counts"))} and
     * {@code reduce(Long::sum, Materialized.as("sums"))}, both to "out".
     */
    static Built grouping(final Params p) {
        final StreamsBuilder builder = new StreamsBuilder();
        final KStream<String, Long> in = builder.stream("in", Consumed.with(Serdes.String(), Serdes.Long()));
        final String name = Joins.optString(p, "grouped_name");
        final Grouped<String, Long> grouped = name == null ? Grouped.with(Serdes.String(), Serdes.Long())
            : Grouped.<String, Long>as(name).withKeySerde(Serdes.String()).withValueSerde(Serdes.Long());
        // "int_key_on": the value itself as the key, a Long where the repartition topic's key serde
        // is a String one (its serializer fails)
        final Long intKeyOn = p.has("int_key_on") ? p.node.get("int_key_on").asLong() : null;
        @SuppressWarnings({"unchecked", "rawtypes"})
        final KeyValueMapper<String, Long, String> key = (KeyValueMapper) (KeyValueMapper<String, Long, Object>)
            (k, v) -> v == null ? null : v.equals(intKeyOn) ? v : k + Math.floorMod(v, 2);
        final KGroupedStream<String, Long> g = p.choice("by", null, Set.of("group_by", "group_by_key")).equals("group_by")
            ? in.groupBy(key, grouped) : in.selectKey(key).groupByKey(grouped);
        final boolean countsNamed = p.bool("counts_named", true);
        final boolean aggNames = p.bool("agg_names", false);
        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> cm = countsNamed ? counts(p)
            : Materialized.with(Serdes.String(), Serdes.Long());
        if (!countsNamed) {
            cm = p.bool("caching", true) ? cm.withCachingEnabled() : cm.withCachingDisabled();
        }
        (aggNames ? g.count(Named.as("n-count"), cm) : g.count(cm))
            .toStream().to("out", Produced.with(Serdes.String(), Serdes.Long()));
        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> sums = Materialized.as("sums");
        sums = p.bool("caching", true) ? sums.withCachingEnabled() : sums.withCachingDisabled();
        (aggNames ? g.reduce(Long::sum, Named.as("n-reduce"), sums) : g.reduce(Long::sum, sums))
            .toStream().to("out", Produced.with(Serdes.String(), Serdes.Long()));
        final Built built = built(builder, List.of("in"), new StringDeserializer(), new LongDeserializer());
        if (countsNamed) {
            built.stores.put("counts", "kv_ts");
        }
        built.stores.put("sums", "kv_ts");
        return built;
    }

    /** The extractor of {@link #timestampExtractor}. */
    static final class ValueOrPartitionTime implements TimestampExtractor {
        @Override
        public long extract(final ConsumerRecord<Object, Object> record, final long partitionTime) {
            final Object v = record.value();
            return v == null ? partitionTime : (Long) v;
        }
    }

    /** The fixed-key processor of {@link #processValues}. */
    static final class Doubling implements FixedKeyProcessor<String, Long, Long> {
        /** the value on which process fails after its first forward ("raise_on"), or null */
        private final Long raiseOn;
        private FixedKeyProcessorContext<String, Long> context;

        Doubling(final Long raiseOn) {
            this.raiseOn = raiseOn;
        }

        @Override
        public void init(final FixedKeyProcessorContext<String, Long> context) {
            this.context = context;
        }

        @Override
        public void process(final FixedKeyRecord<String, Long> record) {
            final Long v = record.value();
            if (v == null) {
                context.forward(record);
                return;
            }
            context.forward(record.withValue(v * 2).withTimestamp(record.timestamp() + 1));
            if (v.equals(raiseOn)) {
                throw new Oracle.UserFunctionError(v);
            }
            if (Math.floorMod(v, 2) == 1) {
                context.forward(record);
            }
        }
    }

    /** A branch's predicate, failing on the value of its "raise_on" (if any) before it tests. */
    static Predicate<String, Long> predicate(final JsonNode pred) {
        final Predicate<String, Long> test = test(pred);
        final JsonNode raiseOn = pred.get("raise_on");
        if (raiseOn == null || raiseOn.isNull()) {
            return test;
        }
        final long r = raiseOn.asLong();
        return (k, v) -> {
            if (v != null && v == r) {
                throw new Oracle.UserFunctionError(v);
            }
            return test.test(k, v);
        };
    }

    static Predicate<String, Long> test(final JsonNode pred) {
        if (pred == null || !pred.isObject()) {
            throw new CaseError("a branch needs a \"pred\" object, got " + pred);
        }
        if (pred.has("mod")) {
            final long m = pred.get("mod").asLong();
            final long r = pred.path("rem").asLong(0);
            if (m <= 0) {
                throw new CaseError("a branch's \"mod\" must be positive, got " + pred);
            }
            return (k, v) -> v != null && Math.floorMod(v, m) == r;
        }
        if (pred.has("null")) {
            return (k, v) -> v == null;
        }
        if (pred.has("key")) {
            final String key = pred.get("key").asText();
            return (k, v) -> key.equals(k);
        }
        throw new CaseError("unknown branch predicate " + pred + " (known: mod/rem, null, key)");
    }

    /** The branch's {@code Branched}, or null for an unnamed branch without a chain. */
    static Branched<String, Long> branched(final JsonNode b) {
        final JsonNode n = b.get("name");
        final String name = n == null || n.isNull() ? null : n.asText();
        final JsonNode c = b.get("chain");
        final String chain = c == null || c.isNull() ? "none" : c.asText();
        if (!CHAINS.contains(chain)) {
            throw new CaseError("unknown branch chain '" + chain + "' (known: " + CHAINS + ")");
        }
        final Branched<String, Long> branched = switch (chain) {
            case "map" -> Branched.withFunction(s -> s.mapValues(v -> v == null ? null : v * 10));
            case "consume" -> Branched.withConsumer(s -> s.mapValues(v -> "consumed:" + v)
                .to("out", Produced.with(Serdes.String(), Serdes.String())));
            case "drop" -> Branched.withFunction(s -> null);
            default -> null;
        };
        if (branched == null) {
            return name == null ? null : Branched.as(name);
        }
        return name == null ? branched : branched.withName(name);
    }
}
