package kspark.oracle;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindowedDeserializer;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.TimeWindowedDeserializer;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import kspark.oracle.Oracle.Built;
import kspark.oracle.Oracle.CaseError;
import kspark.oracle.Oracle.Params;

/**
 * The {@code headers} shape (tests/oracle/README.md): a pipeline drawn at random, to see which
 * headers each operator's results carry. {@code stream("in")} or {@code table("in",
 * Materialized.as("source")).toStream()}, the stateless operators of {@code pre}, one
 * {@code tail} (none, a stream aggregation, a table aggregation of {@code toTable}, a windowed
 * aggregation, a stream-table join with {@code table("t")} (versioned or not, with a grace
 * buffer or not), a stream-stream join with
 * {@code stream("s")}), the value-only operators of {@code post}, then {@code to("out")}. String
 * keys (windowed after a windowed tail), Long values. No store is dumped.
 */
final class HeaderShape {

    static final Set<String> PARAMS = Set.of("source", "source_caching", "pre", "tail", "agg", "caching",
        "table_caching", "windows", "size", "advance", "grace", "emit", "suppress", "kind", "versioned", "post");
    static final Set<String> OPS = Set.of("filter", "map_values", "flat_map_values", "map", "flat_map", "repartition",
        "h_read", "h_set", "h_add", "h_remove");
    /** The operators that keep the key (allowed in {@code post}, after a windowed tail too). */
    static final Set<String> VALUE_OPS = Set.of("filter", "map_values", "flat_map_values", "h_read", "h_set", "h_add",
        "h_remove");
    static final Set<String> TAILS = Set.of("none", "aggregate", "table_aggregate", "windowed", "stream_table_join",
        "stream_join");
    /** The retention of a windowed tail's store: nothing expires within a case. */
    static final long RETENTION = 10_000_000L;

    private HeaderShape() {
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static Built build(final Params p) {
        final StreamsBuilder builder = new StreamsBuilder();
        final Consumed<String, Long> consumed = Consumed.with(Serdes.String(), Serdes.Long());
        final String tail = p.choice("tail", "none", TAILS);
        final List<String> pre = ops(p, "pre", OPS);
        KTable<String, Long> sourceTable = null;
        KStream<String, Long> stream;
        if (p.choice("source", "stream", Set.of("stream", "table")).equals("table")) {
            sourceTable = builder.table("in", consumed, kv(p, "source", "source_caching"));
            // a table aggregation of the source table itself when nothing comes between
            stream = tail.equals("table_aggregate") && pre.isEmpty() ? null : sourceTable.toStream();
        } else {
            stream = builder.stream("in", consumed);
        }
        for (final String op : pre) {
            stream = (KStream<String, Long>) apply(stream, op);
        }
        final List<String> inputs = new ArrayList<>(List.of("in"));
        final Grouped<String, Long> grouped = Grouped.with(Serdes.String(), Serdes.Long());
        final ValueJoiner<Long, Long, Long> joiner = (l, r) -> (l == null ? 0 : l) * 100 + (r == null ? 0 : r);
        Serde<?> keySerde = Serdes.String();
        Deserializer<?> keys = new StringDeserializer();
        KStream<?, Long> out;
        switch (tail) {
            case "aggregate" -> {
                final KGroupedStream<String, Long> g = stream.groupByKey(grouped);
                final Materialized m = kv(p, "store", "caching");
                final KTable<String, Long> t = switch (p.choice("agg", null, Set.of("count", "sum", "reduce_sum"))) {
                    case "count" -> g.count(m);
                    case "sum" -> g.aggregate(() -> 0L, (k, v, agg) -> agg + v, m);
                    default -> g.reduce(Long::sum, m);
                };
                out = ((KTable<String, Long>) (KTable) Oracle.maybeSuppress(p, (KTable) t, false)).toStream();
            }
            case "table_aggregate" -> {
                final KTable<String, Long> table = stream == null ? sourceTable
                    : stream.toTable(kv(p, "table", "table_caching"));
                final KGroupedTable<String, Long> g = table.groupBy(
                    (k, v) -> KeyValue.pair("g" + Math.floorMod(v, 2), v), grouped);
                final Materialized m = kv(p, "store", "caching");
                final KTable<String, Long> t = switch (p.choice("agg", null, Set.of("count", "sum", "reduce_sum"))) {
                    case "count" -> g.count(m);
                    case "sum" -> g.aggregate(() -> 0L, (k, v, agg) -> agg + v, (k, v, agg) -> agg - v, m);
                    default -> g.reduce(Long::sum, (a, b) -> a - b, m);
                };
                out = ((KTable<String, Long>) (KTable) Oracle.maybeSuppress(p, (KTable) t, false)).toStream();
            }
            case "windowed" -> {
                final KGroupedStream<String, Long> g = stream.groupByKey(grouped);
                final long size = p.ms("size", null, 1);
                final Duration grace = Duration.ofMillis(p.ms("grace", 0L, 0));
                final boolean close = Oracle.emitClose(p);
                final String op = p.choice("agg", null, Set.of("count", "sum", "reduce_sum"));
                Materialized m = Materialized.as("store");
                m = m.withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()).withRetention(Duration.ofMillis(RETENTION));
                m = p.bool("caching", true) ? m.withCachingEnabled() : m.withCachingDisabled();
                final KTable t;
                if (p.choice("windows", null, Set.of("time", "sliding", "session")).equals("session")) {
                    SessionWindowedKStream<String, Long> w = g.windowedBy(
                        SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(size), grace));
                    if (close) {
                        w = w.emitStrategy(EmitStrategy.onWindowClose());
                    }
                    t = switch (op) {
                        case "count" -> w.count(m);
                        case "sum" -> w.aggregate(() -> 0L, (k, v, agg) -> v == null ? agg : agg + v,
                            (k, a, b) -> a + b, m);
                        default -> w.reduce((a, b) -> b == null ? a : a + b, m);
                    };
                    keySerde = WindowedSerdes.sessionWindowedSerdeFrom(String.class);
                    keys = new SessionWindowedDeserializer<>(new StringDeserializer());
                } else {
                    TimeWindowedKStream<String, Long> w;
                    if (p.node.get("windows").asText().equals("time")) {
                        TimeWindows windows = TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), grace);
                        if (p.has("advance")) {
                            windows = windows.advanceBy(Duration.ofMillis(p.ms("advance", null, 1)));
                        }
                        w = g.windowedBy(windows);
                    } else {
                        w = g.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(size), grace));
                    }
                    if (close) {
                        w = w.emitStrategy(EmitStrategy.onWindowClose());
                    }
                    t = switch (op) {
                        case "count" -> w.count(m);
                        case "sum" -> w.aggregate(() -> 0L, (k, v, agg) -> v == null ? agg : agg + v, m);
                        default -> w.reduce((a, b) -> b == null ? a : a + b, m);
                    };
                    keySerde = WindowedSerdes.timeWindowedSerdeFrom(String.class, size);
                    keys = new TimeWindowedDeserializer<>(new StringDeserializer(), size);
                }
                out = Oracle.maybeSuppress(p, t, true).toStream();
            }
            case "stream_table_join" -> {
                // "versioned": ms of history in a versioned store, "grace": the join's grace buffer
                final KTable<String, Long> table = p.has("versioned")
                    ? builder.table("t", consumed, Materialized.<String, Long>as(Stores.persistentVersionedKeyValueStore(
                        "table", Duration.ofMillis(p.ms("versioned", null, 0))))
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
                    : builder.table("t", consumed, kv(p, "table", "table_caching"));
                Joined<String, Long, Long> joined = Joined.with(Serdes.String(), Serdes.Long(), Serdes.Long());
                if (p.has("grace")) {
                    joined = joined.withGracePeriod(Duration.ofMillis(p.ms("grace", null, 0)));
                }
                out = kind(p, Set.of("inner", "left")).equals("inner") ? stream.join(table, joiner, joined)
                    : stream.leftJoin(table, joiner, joined);
                inputs.add("t");
            }
            case "stream_join" -> {
                final KStream<String, Long> other = builder.stream("s", consumed);
                final JoinWindows windows = JoinWindows.ofTimeDifferenceAndGrace(
                    Duration.ofMillis(p.ms("size", null, 0)), Duration.ofMillis(p.ms("grace", 0L, 0)));
                final StreamJoined<String, Long, Long> joined =
                    StreamJoined.with(Serdes.String(), Serdes.Long(), Serdes.Long());
                out = switch (kind(p, Set.of("inner", "left", "outer"))) {
                    case "inner" -> stream.join(other, joiner, windows, joined);
                    case "left" -> stream.leftJoin(other, joiner, windows, joined);
                    default -> stream.outerJoin(other, joiner, windows, joined);
                };
                inputs.add("s");
            }
            default -> out = stream;
        }
        for (final String op : ops(p, "post", VALUE_OPS)) {
            out = apply(out, op);
        }
        ((KStream) out).to("out", Produced.with(keySerde, Serdes.Long()));
        final Built built = Dsl.built(builder, inputs, keys, new LongDeserializer());
        built.windowedOutput = tail.equals("windowed");
        return built;
    }

    static String kind(final Params p, final Set<String> kinds) {
        return p.choice("kind", null, kinds);
    }

    /** {@code Materialized.as(name)}, String keys, Long values, caching as {@code caching} says. */
    static Materialized<String, Long, KeyValueStore<Bytes, byte[]>> kv(final Params p, final String name,
                                                                      final String caching) {
        final Materialized<String, Long, KeyValueStore<Bytes, byte[]>> m =
            Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(name)
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long());
        return p.bool(caching, true) ? m.withCachingEnabled() : m.withCachingDisabled();
    }

    /** The operators named by the list parameter {@code name} (absent: none). */
    static List<String> ops(final Params p, final String name, final Set<String> known) {
        final List<String> out = new ArrayList<>();
        if (!p.has(name)) {
            return out;
        }
        final JsonNode list = p.node.get(name);
        if (!list.isArray()) {
            throw new CaseError("parameter '" + name + "' of shape 'headers' must be a list, got " + list);
        }
        for (final JsonNode op : list) {
            if (!op.isTextual() || !known.contains(op.asText())) {
                throw new CaseError("unknown operator " + op + " in '" + name + "' (known: " + known + ")");
            }
            out.add(op.asText());
        }
        return out;
    }

    /**
     * One operator: {@code filter(v == null || floorMod(v, 3) != 0)}, {@code mapValues(v + 1)},
     * {@code flatMapValues([v, v + 100])} (a null value: none), {@code map((k + floorMod(v, 2),
     * v))} (a null value keeps its key), {@code flatMap([(k, v), (k + "x", v + 10)])} (a null
     * value: the first only), {@code repartition()}, or {@code processValues(HeaderOp)}.
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static <K> KStream<K, Long> apply(final KStream<K, Long> s, final String op) {
        return switch (op) {
            case "filter" -> s.filter((k, v) -> v == null || Math.floorMod(v, 3) != 0);
            case "map_values" -> s.mapValues(v -> v == null ? null : v + 1);
            case "flat_map_values" -> s.flatMapValues(v -> v == null ? List.<Long>of() : List.of(v, v + 100));
            case "map" -> (KStream) ((KStream<String, Long>) s).map(
                (k, v) -> KeyValue.pair(v == null ? k : k + Math.floorMod(v, 2), v));
            case "flat_map" -> (KStream) ((KStream<String, Long>) s).flatMap(
                (k, v) -> v == null ? List.of(KeyValue.pair(k, v))
                    : List.of(KeyValue.pair(k, v), KeyValue.pair(k + "x", v + 10)));
            case "repartition" -> (KStream) ((KStream<String, Long>) s).repartition(
                Repartitioned.with(Serdes.String(), Serdes.Long()));
            default -> s.processValues(() -> new HeaderOp<>(op));
        };
    }

    /**
     * The header operators (kspark_headers.HeaderOp): {@code h_read} adds to a value 1000 per
     * header, and for the last header named "h" 7 (a null value) or 100 + its length;
     * {@code h_set} replaces the headers by one, "s", the value's text (null for a null value);
     * {@code h_add} adds "h" with the value's text ("null" for a null value); {@code h_remove}
     * removes every "h". The last two change the record's headers in place, as users do.
     */
    static final class HeaderOp<K> implements FixedKeyProcessor<K, Long, Long> {
        private final String op;
        private FixedKeyProcessorContext<K, Long> context;

        HeaderOp(final String op) {
            this.op = op;
        }

        @Override
        public void init(final FixedKeyProcessorContext<K, Long> context) {
            this.context = context;
        }

        @Override
        public void process(final FixedKeyRecord<K, Long> record) {
            final Long v = record.value();
            switch (op) {
                case "h_read" -> context.forward(record.withValue(v == null ? null : v + read(record.headers())));
                case "h_set" -> context.forward(record.withHeaders(new RecordHeaders().add("s", v == null ? null
                    : String.valueOf(v).getBytes(StandardCharsets.UTF_8))));
                case "h_add" -> {
                    record.headers().add("h", String.valueOf(v).getBytes(StandardCharsets.UTF_8));
                    context.forward(record);
                }
                default -> {
                    record.headers().remove("h");
                    context.forward(record);
                }
            }
        }

        static long read(final Headers headers) {
            final Header last = headers.lastHeader("h");
            return 1000L * headers.toArray().length
                + (last == null ? 0 : last.value() == null ? 7 : 100 + last.value().length);
        }
    }
}
