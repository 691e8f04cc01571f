package kspark.oracle;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.KeyValueMapper;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;

import kspark.oracle.Oracle.Built;
import kspark.oracle.Oracle.CaseError;
import kspark.oracle.Oracle.Params;

/**
 * The join shapes of the oracle (tests/oracle/README.md): stream-stream, stream-table,
 * stream-global table, table-table and foreign-key table-table joins.
 *
 * <p>Every shape reads String keys and String values from the topics {@code "left"} and
 * {@code "right"} (a JSON {@code null} value is a tombstone) and writes String keys and values
 * to {@code "out"}. The joiner is always {@link #JOINER}, applied as (left value, right value)
 * from the point of view of the receiver of the join method.
 *
 * <p>The changelogs of a join shape ({@code "changelogs": true}) are those of every store of its
 * topology, found with {@link Topology#describe()} since generated store names depend on the
 * DSL's node counter; a store that is not logged simply has none.
 */
final class Joins {

    /** The join shapes and their parameters (besides {@link Oracle#COMMON}). */
    static final Map<String, Set<String>> SHAPES = new LinkedHashMap<>();

    static {
        SHAPES.put("stream_join", Set.of("kind", "diff", "grace", "before", "after", "store_name", "logging", "self", "rekey_left"));
        SHAPES.put("stream_table_join", Set.of("kind", "table_caching", "rekey_left", "versioned", "grace"));
        SHAPES.put("global_join", Set.of("kind"));
        SHAPES.put("table_join", Set.of("kind", "left_caching", "right_caching", "materialized", "result_caching",
            "left_versioned", "right_versioned"));
        SHAPES.put("fk_join", Set.of("kind", "left_caching", "right_caching", "materialized", "result_caching",
            "left_versioned", "right_versioned"));
    }

    /** The joiner of every join shape: Java string concatenation, a missing side prints "null". */
    static final ValueJoiner<String, String, String> JOINER = (l, r) -> l + "+" + r;

    static {
        // every join shape: its joiner returns null on the left value "none_on", fails on "raise_on"
        SHAPES.replaceAll((shape, params) -> {
            final Set<String> all = new TreeSet<>(params);
            all.addAll(Set.of("none_on", "raise_on"));
            if (shape.equals("global_join")) {
                all.add("global_caching");
            }
            return all;
        });
    }

    /** {@link #JOINER} returning null on the case's "none_on" left value, failing on "raise_on". */
    static ValueJoiner<String, String, String> joiner(final Params p) {
        return (l, r) -> Oracle.misbehaves(p, l) ? null : JOINER.apply(l, r);
    }

    /** The global join's key selector: the first character of the value, none for "n...". */
    static final KeyValueMapper<String, String, String> GLOBAL_KEY =
        (k, v) -> (v == null || v.startsWith("n")) ? null : v.substring(0, 1);

    /** The foreign-key extractor of fk_join: the first character of the value, none for "n...". */
    static final Function<String, String> FOREIGN_KEY = v -> v.startsWith("n") ? null : v.substring(0, 1);

    static final Set<String> INNER_LEFT = Set.of("inner", "left");
    static final Set<String> INNER_LEFT_OUTER = Set.of("inner", "left", "outer");

    private Joins() {
    }

    /** The join shape {@code shape} built from its parameters. */
    static Built build(final String shape, final Params p) {
        return switch (shape) {
            case "stream_join" -> streamJoin(p);
            case "stream_table_join" -> streamTableJoin(p);
            case "global_join" -> globalJoin(p);
            case "table_join" -> tableJoin(p);
            case "fk_join" -> fkJoin(p);
            default -> throw new CaseError("unknown join shape '" + shape + "'");
        };
    }

    // -- shapes ------------------------------------------------------------------------------------

    /**
     * {@code left.<join|leftJoin|outerJoin>(right, JOINER, windows, streamJoined).to("out")}, where
     * right is the stream of topic "right", or left itself when {@code self}; with
     * {@code rekey_left} left is first {@code selectKey((k, v) -> k)}, which makes Kafka Streams
     * repartition it. Its window stores are not dumped (only their changelogs).
     */
    static Built streamJoin(final Params p) {
        final ValueJoiner<String, String, String> JOINER = joiner(p); // the case's (shadows the field)
        final String kind = p.choice("kind", null, INNER_LEFT_OUTER);
        final long diff = p.ms("diff", null, 0);
        final Long grace = p.optMs("grace", 0);
        JoinWindows windows = grace == null
            ? JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(diff))
            : JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(diff), Duration.ofMillis(grace));
        // before / after may be negative: Kafka Streams itself checks before + after >= 0, also
        // for the intermediate windows, so a negative before goes after "after" when it must
        // (the final windows are the same either way)
        final Long before = p.optMs("before", Long.MIN_VALUE);
        final Long after = p.optMs("after", Long.MIN_VALUE);
        final boolean afterFirst = before != null && after != null && before + diff < 0;
        if (afterFirst) {
            windows = windows.after(Duration.ofMillis(after));
        }
        if (before != null) {
            windows = windows.before(Duration.ofMillis(before));
        }
        if (after != null && !afterFirst) {
            windows = windows.after(Duration.ofMillis(after));
        }
        StreamJoined<String, String, String> joined = StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String());
        final String storeName = optString(p, "store_name");
        if (storeName != null) {
            joined = joined.withStoreName(storeName);
        }
        if (!p.bool("logging", true)) {
            joined = joined.withLoggingDisabled();
        }
        final boolean self = p.bool("self", false);

        final StreamsBuilder builder = new StreamsBuilder();
        final KStream<String, String> left = maybeRekey(p, stream(builder, "left"));
        final KStream<String, String> right = self ? left : stream(builder, "right");
        final KStream<String, String> joinedStream = switch (kind) {
            case "inner" -> left.join(right, JOINER, windows, joined);
            case "left" -> left.leftJoin(right, JOINER, windows, joined);
            default -> left.outerJoin(right, JOINER, windows, joined);
        };
        joinedStream.to("out", Produced.with(Serdes.String(), Serdes.String()));
        return built(builder, self ? List.of("left") : List.of("left", "right"));
    }

    /**
     * {@code stream("left").<join|leftJoin>(table("right", Materialized "table"), JOINER)} (with
     * {@code rekey_left} the stream is repartitioned first); dumps the store "table".
     */
    static Built streamTableJoin(final Params p) {
        final ValueJoiner<String, String, String> JOINER = joiner(p); // the case's (shadows the field)
        final String kind = p.choice("kind", null, INNER_LEFT);
        final StreamsBuilder builder = new StreamsBuilder();
        final KStream<String, String> stream = maybeRekey(p, stream(builder, "left"));
        final Long history = p.optMs("versioned", 0);
        final KTable<String, String> table = history == null
            ? table(builder, "right", "table", p.bool("table_caching", true))
            : versionedTable(builder, "right", "table", history);
        Joined<String, String, String> joined = Joined.with(Serdes.String(), Serdes.String(), Serdes.String());
        final Long grace = p.optMs("grace", 0);
        if (grace != null) {
            joined = joined.withGracePeriod(Duration.ofMillis(grace));
        }
        final KStream<String, String> result = kind.equals("inner")
            ? stream.join(table, JOINER, joined)
            : stream.leftJoin(table, JOINER, joined);
        result.to("out", Produced.with(Serdes.String(), Serdes.String()));
        final Built b = built(builder, List.of("left", "right"));
        b.stores.put("table", history == null ? "kv_ts" : "versioned");
        return b;
    }

    /**
     * {@code stream("left").<join|leftJoin>(globalTable("right", Materialized "global"),
     * GLOBAL_KEY, JOINER)}; dumps the global store "global".
     */
    static Built globalJoin(final Params p) {
        final ValueJoiner<String, String, String> JOINER = joiner(p); // the case's (shadows the field)
        final String kind = p.choice("kind", null, INNER_LEFT);
        final StreamsBuilder builder = new StreamsBuilder();
        final KStream<String, String> stream = stream(builder, "left");
        final GlobalKTable<String, String> global = builder.globalTable("right",
            Consumed.with(Serdes.String(), Serdes.String()), stringStore("global", p.bool("global_caching", true)));
        final KStream<String, String> result = kind.equals("inner")
            ? stream.join(global, GLOBAL_KEY, JOINER)
            : stream.leftJoin(global, GLOBAL_KEY, JOINER);
        result.to("out", Produced.with(Serdes.String(), Serdes.String()));
        final Built b = built(builder, List.of("left", "right"));
        b.stores.put("global", "kv_ts");
        return b;
    }

    /**
     * {@code table("left", "left-store").<join|leftJoin|outerJoin>(table("right", "right-store"),
     * JOINER[, Materialized "result"]).toStream().to("out")}; dumps every named store.
     * {@code result_caching} only applies with {@code materialized}.
     */
    static Built tableJoin(final Params p) {
        final ValueJoiner<String, String, String> JOINER = joiner(p); // the case's (shadows the field)
        final String kind = p.choice("kind", null, INNER_LEFT_OUTER);
        final StreamsBuilder builder = new StreamsBuilder();
        final KTable<String, String> left = sideTable(builder, p, "left");
        final KTable<String, String> right = sideTable(builder, p, "right");
        final boolean materialized = p.bool("materialized", false);
        final boolean resultCaching = p.bool("result_caching", true);
        final KTable<String, String> result;
        if (materialized) {
            final Materialized<String, String, KeyValueStore<Bytes, byte[]>> m = stringStore("result", resultCaching);
            result = switch (kind) {
                case "inner" -> left.join(right, JOINER, m);
                case "left" -> left.leftJoin(right, JOINER, m);
                default -> left.outerJoin(right, JOINER, m);
            };
        } else {
            result = switch (kind) {
                case "inner" -> left.join(right, JOINER);
                case "left" -> left.leftJoin(right, JOINER);
                default -> left.outerJoin(right, JOINER);
            };
        }
        return versionedSides(p, tableResult(builder, result, materialized));
    }

    /**
     * {@code table("left", "left-store").<join|leftJoin>(table("right", "right-store"),
     * FOREIGN_KEY, JOINER[, Materialized "result"]).toStream().to("out")}; dumps every named store.
     * {@code result_caching} only applies with {@code materialized}.
     */
    static Built fkJoin(final Params p) {
        final ValueJoiner<String, String, String> JOINER = joiner(p); // the case's (shadows the field)
        final String kind = p.choice("kind", null, INNER_LEFT);
        final StreamsBuilder builder = new StreamsBuilder();
        final KTable<String, String> left = sideTable(builder, p, "left");
        final KTable<String, String> right = sideTable(builder, p, "right");
        final boolean materialized = p.bool("materialized", false);
        final boolean resultCaching = p.bool("result_caching", true);
        final KTable<String, String> result;
        if (materialized) {
            final Materialized<String, String, KeyValueStore<Bytes, byte[]>> m = stringStore("result", resultCaching);
            result = kind.equals("inner")
                ? left.join(right, FOREIGN_KEY, JOINER, m)
                : left.leftJoin(right, FOREIGN_KEY, JOINER, m);
        } else {
            result = kind.equals("inner")
                ? left.join(right, FOREIGN_KEY, JOINER)
                : left.leftJoin(right, FOREIGN_KEY, JOINER);
        }
        return versionedSides(p, tableResult(builder, result, materialized));
    }

    // -- helpers -----------------------------------------------------------------------------------

    static KStream<String, String> stream(final StreamsBuilder builder, final String topic) {
        return builder.stream(topic, Consumed.with(Serdes.String(), Serdes.String()));
    }

    /** With {@code rekey_left}, an identity {@code selectKey}: Kafka Streams repartitions after it. */
    static KStream<String, String> maybeRekey(final Params p, final KStream<String, String> stream) {
        return p.bool("rekey_left", false) ? stream.selectKey((k, v) -> k) : stream;
    }

    static KTable<String, String> table(final StreamsBuilder builder, final String topic, final String store, final boolean caching) {
        return builder.table(topic, Consumed.with(Serdes.String(), Serdes.String()), stringStore(store, caching));
    }

    /** A table join's {@code side} ("left" / "right"): {@code <side>_versioned} ms of history in a versioned
     * store, else a key-value store with {@code <side>_caching}; its store is {@code <side>-store}. */
    static KTable<String, String> sideTable(final StreamsBuilder builder, final Params p, final String side) {
        final Long history = p.optMs(side + "_versioned", 0);
        return history == null
            ? table(builder, side, side + "-store", p.bool(side + "_caching", true))
            : versionedTable(builder, side, side + "-store", history);
    }

    /** {@code b} with the versioned sides' stores dumped as such. */
    static Built versionedSides(final Params p, final Built b) {
        for (final String side : List.of("left", "right")) {
            if (p.optMs(side + "_versioned", 0) != null) {
                b.stores.put(side + "-store", "versioned");
            }
        }
        return b;
    }

    /** A table kept in a versioned store (RocksDB, the only kind Kafka Streams has) of {@code history} ms. */
    static KTable<String, String> versionedTable(final StreamsBuilder builder, final String topic, final String store,
                                                 final long history) {
        return builder.table(topic, Consumed.with(Serdes.String(), Serdes.String()),
            Materialized.<String, String>as(Stores.persistentVersionedKeyValueStore(store, Duration.ofMillis(history)))
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()));
    }

    static Materialized<String, String, KeyValueStore<Bytes, byte[]>> stringStore(final String name, final boolean caching) {
        final Materialized<String, String, KeyValueStore<Bytes, byte[]>> m = Materialized
            .<String, String, KeyValueStore<Bytes, byte[]>>as(name)
            .withKeySerde(Serdes.String()).withValueSerde(Serdes.String());
        return caching ? m.withCachingEnabled() : m.withCachingDisabled();
    }

    static Built tableResult(final StreamsBuilder builder, final KTable<String, String> result, final boolean materialized) {
        result.toStream().to("out", Produced.with(Serdes.String(), Serdes.String()));
        final Built b = built(builder, List.of("left", "right"));
        b.stores.put("left-store", "kv_ts");
        b.stores.put("right-store", "kv_ts");
        if (materialized) {
            b.stores.put("result", "kv_ts");
        }
        return b;
    }

    /** The topology with String inputs and outputs; its changelogs are those of all its stores. */
    static Built built(final StreamsBuilder builder, final List<String> inputTopics) {
        final Built b = new Built();
        b.topology = builder.build();
        b.inputTopics = inputTopics;
        b.inputValueSerde = Oracle.cast(Serdes.String());
        b.outputKeyDeserializer = new StringDeserializer();
        b.outputValueDeserializer = new StringDeserializer();
        b.changelogStores = storeNames(b.topology);
        return b;
    }

    /** The names of every store of the topology (its processors' and its global stores), sorted. */
    static TreeSet<String> storeNames(final Topology topology) {
        final TopologyDescription description = topology.describe();
        final TreeSet<String> names = new TreeSet<>();
        for (final TopologyDescription.Subtopology sub : description.subtopologies()) {
            for (final TopologyDescription.Node node : sub.nodes()) {
                if (node instanceof TopologyDescription.Processor processor) {
                    names.addAll(processor.stores());
                }
            }
        }
        for (final TopologyDescription.GlobalStore global : description.globalStores()) {
            names.addAll(global.processor().stores());
        }
        return names;
    }

    static String optString(final Params p, final String name) {
        if (!p.has(name)) {
            return null;
        }
        final JsonNode v = p.node.get(name);
        if (!v.isTextual() || v.asText().isEmpty()) {
            throw new CaseError("parameter '" + name + "' of shape '" + p.shape + "' must be a non-empty string, got " + v);
        }
        return v.asText();
    }
}
