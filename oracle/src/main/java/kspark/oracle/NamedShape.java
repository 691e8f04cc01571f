package kspark.oracle;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.KeyValueMapper;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TableJoined;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.internals.NamedInternal;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Function;

import kspark.oracle.Oracle.Built;
import kspark.oracle.Oracle.CaseError;
import kspark.oracle.Oracle.Params;

/**
 * The {@code named} shape (tests/oracle/README.md): stateless operators, then the parts of
 * {@code parts} (joins of every kind, windowed and cogrouped aggregations, a suppression, a
 * re-grouped table, {@code toTable}), every node of {@code names} named ({@code "n-<node>"},
 * by {@code Named}, {@code Consumed.withName}, {@code Produced.withName},
 * {@code StreamJoined.withName}, {@code Joined.withName}, {@code TableJoined.as},
 * {@code Grouped.as} or {@code Suppressed.withName}) and the stores of {@code store_names}
 * named ({@code "s-<part>"}), all writing String keys and Long values to "out".
 */
final class NamedShape {

    static final Set<String> PARTS = Set.of("stream_join", "stream_table_join", "global_join", "table_join",
        "fk_join", "windowed", "cogroup", "table_group", "to_table", "process");
    static final Set<String> TABLE_PARTS = Set.of("stream_table_join", "table_join", "fk_join", "table_group");
    static final String[] KEYS = {"a", "b", "c"};
    /** a retention longer than any case (the caches and stores then expire nothing) */
    static final Duration LONG_RETENTION = Duration.ofMillis(10_000_000L);

    private static final Serde<String> S = Serdes.String();
    private static final Serde<Long> L = Serdes.Long();
    private static final ValueJoiner<Long, Long, Long> JOINER =
        (l, r) -> (l == null ? 0L : l) * 100 + (r == null ? 0L : r);

    private final Set<String> names;
    private final Set<String> parts;
    private final Set<String> stores;
    private final JsonNode kinds;
    private final boolean rekeyRight;

    private NamedShape(final Params p) {
        rekeyRight = p.bool("rekey_right", false);
        names = strings(p, "names");
        parts = strings(p, "parts");
        stores = strings(p, "store_names");
        kinds = p.node.get("kinds");
        for (final String part : parts) {
            if (!PARTS.contains(part)) {
                throw new CaseError("unknown part '" + part + "' of the named shape (known: " + PARTS + ")");
            }
        }
    }

    static Set<String> strings(final Params p, final String name) {
        final Set<String> out = new HashSet<>();
        final JsonNode given = p.node.get(name);
        if (given != null && given.isArray()) {
            given.forEach(n -> out.add(n.asText()));
        }
        return out;
    }

    /** The part's join kind ({@code kinds[part]}, default inner). */
    String kind(final String part) {
        final JsonNode k = kinds == null ? null : kinds.get(part);
        return k == null || k.isNull() ? "inner" : k.asText();
    }

    /** {@code Named.as("n-<node>")} or no name (Kafka Streams' own unnamed {@code Named}). */
    Named named(final String node) {
        return names.contains(node) ? Named.as("n-" + node) : NamedInternal.empty();
    }

    String name(final String node) {
        return names.contains(node) ? "n-" + node : null;
    }

    Consumed<String, Long> consumed(final String node) {
        final Consumed<String, Long> c = Consumed.with(S, L);
        return names.contains(node) ? c.withName("n-" + node) : c;
    }

    Materialized<String, Long, KeyValueStore<Bytes, byte[]>> kv(final String store) {
        return stores.contains(store) ? Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("s-" + store)
            .withKeySerde(S).withValueSerde(L) : Materialized.with(S, L);
    }

    Materialized<String, Long, WindowStore<Bytes, byte[]>> window(final String store) {
        final Materialized<String, Long, WindowStore<Bytes, byte[]>> m = stores.contains("windowed")
            ? Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("s-" + store).withKeySerde(S).withValueSerde(L)
            : Materialized.with(S, L);
        return m.withRetention(LONG_RETENTION);
    }

    static Built build(final Params p) {
        return new NamedShape(p).build();
    }

    private Built build() {
        final StreamsBuilder builder = new StreamsBuilder();
        final List<String> topics = new ArrayList<>(List.of("in"));
        final KStream<String, Long> source = builder.stream("in", consumed("source"));
        final KStream<String, Long> f = source.filter((k, v) -> v != null, named("filter"));
        final KStream<String, Long> s = f.mapValues(v -> v * 2, named("map_values"))
            .selectKey((k, v) -> k + "!", named("select_key"))
            .flatMapValues(v -> List.of(v, v + 1), named("flat_map_values"))
            .peek((k, v) -> { }, named("peek"));
        s.to("out", names.contains("sink") ? out().withName("n-sink") : out());
        KTable<String, Long> t = null;
        KTable<String, Long> u = null;
        if (TABLE_PARTS.stream().anyMatch(parts::contains)) {
            t = stores.contains("table") ? builder.table("t", consumed("table"), kv("table"))
                : builder.table("t", consumed("table"));
            topics.add("t");
        }
        if (parts.contains("table_join") || parts.contains("fk_join")) {
            u = builder.table("u", consumed("utable"));
            topics.add("u");
        }
        if (parts.contains("stream_join")) {
            streamJoin(f);
        }
        if (parts.contains("stream_table_join")) {
            Joined<String, Long, Long> joined = Joined.with(S, L, L);
            if (names.contains("stream_table_join")) {
                joined = joined.withName("n-stream_table_join");
            }
            final KStream<String, Long> keyed = f.selectKey((k, v) -> k);
            (kind("stream_table_join").equals("left") ? keyed.leftJoin(t, JOINER, joined) : keyed.join(t, JOINER, joined))
                .to("out", out());
        }
        if (parts.contains("global_join")) {
            final GlobalKTable<String, Long> g = stores.contains("global")
                ? builder.globalTable("g", consumed("global"), kv("global")) : builder.globalTable("g", consumed("global"));
            topics.add("g");
            final KeyValueMapper<String, Long, String> selector = (k, v) -> k;
            (kind("global_join").equals("left") ? f.leftJoin(g, selector, JOINER, named("global_join"))
                : f.join(g, selector, JOINER, named("global_join"))).to("out", out());
        }
        if (parts.contains("table_join")) {
            tableJoin(t, u).toStream().to("out", out());
        }
        if (parts.contains("fk_join")) {
            fkJoin(u, t).toStream().to("out", out());
        }
        if (parts.contains("windowed")) {
            windowed(f.groupByKey(Grouped.with(S, L)));
        }
        if (parts.contains("cogroup")) {
            f.groupByKey(Grouped.with(S, L)).cogroup((String k, Long v, Long a) -> a + v)
                .aggregate(() -> 0L, named("cogroup"), kv("cogroup")).toStream().to("out", out());
            out(f.groupByKey(Grouped.with(S, L)).cogroup((String k, Long v, Long a) -> a + v)
                .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(10)))
                .aggregate(() -> 0L, named("cogroup_time"), window("cogroup_time")));
        }
        if (parts.contains("table_group")) {
            final Grouped<String, Long> grouped = names.contains("table_group")
                ? Grouped.<String, Long>as("n-table_group").withKeySerde(S).withValueSerde(L) : Grouped.with(S, L);
            final KGroupedTable<String, Long> g = t.groupBy((k, v) -> KeyValue.pair("g" + Math.floorMod(v, 2), v), grouped);
            g.count(named("table_count"), kv("table_count")).toStream().to("out", out());
            g.reduce(Long::sum, (a, b) -> a - b, named("table_reduce"), kv("table_reduce")).toStream().to("out", out());
        }
        if (parts.contains("process")) {
            // a named process / processValues takes no index, as Kafka Streams' does
            final KStream<String, Long> values = names.contains("process_values")
                ? f.processValues(FixedKeyForwarding::new, named("process_values")) : f.processValues(FixedKeyForwarding::new);
            (names.contains("process") ? values.process(Forwarding::new, named("process"))
                : values.process(Forwarding::new)).to("out", out());
        }
        if (parts.contains("to_table")) {
            f.selectKey((k, v) -> k).toTable(named("to_table"), kv("to_table")).toStream().to("out", out());
        }
        return Dsl.built(builder, topics, new StringDeserializer(), new LongDeserializer());
    }

    /**
     * {@code f.<kind>(f, joiner, 5 ms windows, StreamJoined[.withName][.withStoreName])}, one side (the
     * right one with {@code rekey_right}) through {@code selectKey((k, v) -> k)}: repartitioned.
     */
    private void streamJoin(final KStream<String, Long> f) {
        StreamJoined<String, Long, Long> sj = StreamJoined.with(S, L, L);
        if (names.contains("stream_join")) {
            sj = sj.withName("n-stream_join");
        }
        if (stores.contains("stream_join")) {
            sj = sj.withStoreName("s-stream_join");
        }
        final KStream<String, Long> left = rekeyRight ? f : f.selectKey((k, v) -> k);
        final KStream<String, Long> right = rekeyRight ? f.selectKey((k, v) -> k) : f;
        final JoinWindows w = JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(5));
        final KStream<String, Long> joined = switch (kind("stream_join")) {
            case "left" -> left.leftJoin(right, JOINER, w, sj);
            case "outer" -> left.outerJoin(right, JOINER, w, sj);
            default -> left.join(right, JOINER, w, sj);
        };
        joined.to("out", out());
    }

    private KTable<String, Long> tableJoin(final KTable<String, Long> t, final KTable<String, Long> u) {
        final boolean materialized = stores.contains("table_join");
        final Named n = named("table_join");
        return switch (kind("table_join")) {
            case "left" -> materialized ? t.leftJoin(u, JOINER, n, kv("table_join")) : t.leftJoin(u, JOINER, n);
            case "outer" -> materialized ? t.outerJoin(u, JOINER, n, kv("table_join")) : t.outerJoin(u, JOINER, n);
            default -> materialized ? t.join(u, JOINER, n, kv("table_join")) : t.join(u, JOINER, n);
        };
    }

    /** {@code u.<kind>(t, v -> KEYS[floorMod(v, 3)], joiner, TableJoined[.as])}. */
    private KTable<String, Long> fkJoin(final KTable<String, Long> u, final KTable<String, Long> t) {
        final Function<Long, String> fk = v -> KEYS[(int) Math.floorMod(v, 3L)];
        final TableJoined<String, String> tj = names.contains("fk_join")
            ? TableJoined.as("n-fk_join") : TableJoined.with(null, null);
        final boolean left = kind("fk_join").equals("left");
        if (stores.contains("fk_join")) {
            return left ? u.leftJoin(t, fk, JOINER, tj, kv("fk_join")) : u.join(t, fk, JOINER, tj, kv("fk_join"));
        }
        return left ? u.leftJoin(t, fk, JOINER, tj) : u.join(t, fk, JOINER, tj);
    }

    /** Time-window count (suppressed until the window closes), sliding reduce, session sum and count. */
    private void windowed(final KGroupedStream<String, Long> g) {
        final KTable<Windowed<String>, Long> counts = g.windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(10)))
            .count(named("time_count"), window("time"));
        out(counts.suppress(names.contains("suppress")
            ? Suppressed.<Windowed<String>>untilWindowCloses(Suppressed.BufferConfig.unbounded()).withName("n-suppress")
            : Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded())));
        out(g.windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(10)))
            .reduce(Long::sum, named("sliding_reduce"), window("sliding")));
        out(g.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMillis(10)))
            .aggregate(() -> 0L, (k, v, a) -> a + v, (k, a, b) -> a + b, named("session_aggregate"),
                session("session")));
        out(g.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMillis(10)))
            .count(named("session_count"), session("session_count")));
    }

    Materialized<String, Long, SessionStore<Bytes, byte[]>> session(final String store) {
        final Materialized<String, Long, SessionStore<Bytes, byte[]>> m = stores.contains("windowed")
            ? Materialized.<String, Long, SessionStore<Bytes, byte[]>>as("s-" + store).withKeySerde(S).withValueSerde(L)
            : Materialized.with(S, L);
        return m.withRetention(LONG_RETENTION);
    }

    /** Forwards every record as it is. */
    static final class Forwarding implements Processor<String, Long, String, Long> {
        private ProcessorContext<String, Long> context;

        @Override
        public void init(final ProcessorContext<String, Long> context) {
            this.context = context;
        }

        @Override
        public void process(final Record<String, Long> record) {
            context.forward(record);
        }
    }

    /** Forwards every record as it is (a fixed-key processor). */
    static final class FixedKeyForwarding implements FixedKeyProcessor<String, Long, Long> {
        private FixedKeyProcessorContext<String, Long> context;

        @Override
        public void init(final FixedKeyProcessorContext<String, Long> context) {
            this.context = context;
        }

        @Override
        public void process(final FixedKeyRecord<String, Long> record) {
            context.forward(record);
        }
    }

    /** A new {@code Produced} (a {@code Produced} is changed by {@code withName}). */
    private static Produced<String, Long> out() {
        return Produced.with(S, L);
    }

    /** A windowed table's updates to "out", keyed {@code key@start}. */
    private static void out(final KTable<Windowed<String>, Long> table) {
        table.toStream().map((wk, v) -> KeyValue.pair(wk.key() + "@" + wk.window().start(), v)).to("out", out());
    }
}
