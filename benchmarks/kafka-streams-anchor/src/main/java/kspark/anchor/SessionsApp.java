package kspark.anchor;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * kspark's main job ({@code kspark/examples/sessions.py}) as a Kafka Streams application: clicks
 * (String user key, JSON value {@code {"page": ...}}) in session windows of 10 s inactivity gap
 * and 10 s grace; the number of clicks per session to the counts topic (session-windowed String
 * key, Long value) and the pages of each session (a JSON array of strings, concatenated when
 * sessions merge) to the pages topic. Emit on window close ({@code --emit close}) or on update
 * through the default record cache ({@code --emit update}). Exactly-once v2.
 *
 * <p>It runs until its standard input is closed, then closes Kafka Streams. It reports on
 * standard output, one line each: {@code created <epoch ms>} (just before the KafkaStreams
 * object is made), {@code state <STATE> <epoch ms>} at each state change, {@code dropped <n>}
 * (the tasks' dropped-records-total) and {@code closed <epoch ms>} at the end, {@code error
 * <message>} if a stream thread died. Kafka's own warnings go to standard error.
 *
 * <p>Options ({@code --name value}): bootstrap, application-id, input, counts, pages, emit
 * (close|update), state-dir, commit-interval-ms (100), threads (2), emit-interval-ms (0),
 * cache-max-bytes (Kafka Streams' default if absent), job (sessions, or counts: a running count
 * of each user's clicks to the counts topic).
 */
public final class SessionsApp {
    static final Duration GAP = Duration.ofMillis(10_000);
    static final Duration GRACE = Duration.ofMillis(10_000);
    static final String COUNTS_STORE = "session-counts";
    static final String PAGES_STORE = "session-pages";
    static final ObjectMapper MAPPER = new ObjectMapper();

    private SessionsApp() {
    }

    /** JSON values as Jackson trees (the clicks). */
    static Serde<JsonNode> jsonSerde() {
        return Serdes.serdeFrom(
            (Serializer<JsonNode>) (topic, value) -> value == null ? null : write(value),
            (Deserializer<JsonNode>) (topic, data) -> {
                try {
                    return data == null ? null : MAPPER.readTree(data);
                } catch (IOException e) {
                    throw new SerializationException(e);
                }
            });
    }

    private static final TypeReference<ArrayList<String>> PAGES = new TypeReference<>() { };

    /** A JSON array of strings (the pages of a session), written compactly as kspark's Json. */
    static Serde<List<String>> pagesSerde() {
        return Serdes.serdeFrom(
            (Serializer<List<String>>) (topic, value) -> value == null ? null : write(value),
            (Deserializer<List<String>>) (topic, data) -> {
                try {
                    return data == null ? null : MAPPER.readValue(data, PAGES);
                } catch (IOException e) {
                    throw new SerializationException(e);
                }
            });
    }

    private static byte[] write(Object value) {
        try {
            return MAPPER.writeValueAsBytes(value);
        } catch (IOException e) {
            throw new SerializationException(e);
        }
    }

    /** The sessions topology, as {@code kspark.examples.sessions.topology}. */
    static Topology topology(String input, String counts, String pages, boolean emitOnClose) {
        StreamsBuilder builder = new StreamsBuilder();
        Serde<String> strings = Serdes.String();
        Serde<JsonNode> json = jsonSerde();
        Serde<List<String>> pagesSerde = pagesSerde();
        SessionWindowedKStream<String, JsonNode> sessions = builder
            .stream(input, Consumed.with(strings, json))
            .groupByKey(Grouped.with(strings, json))
            .windowedBy(SessionWindows.ofInactivityGapAndGrace(GAP, GRACE));
        if (emitOnClose) {
            sessions = sessions.emitStrategy(EmitStrategy.onWindowClose());
        }
        Serde<Windowed<String>> windowedKey = WindowedSerdes.sessionWindowedSerdeFrom(String.class);
        sessions.count(Materialized.<String, Long, SessionStore<Bytes, byte[]>>as(COUNTS_STORE))
            .toStream()
            .to(counts, Produced.with(windowedKey, Serdes.Long()));
        sessions.aggregate(
                ArrayList::new,
                (user, click, list) -> {
                    // the pages aggregate's adder: the click's page appended (a null click adds
                    // none); the aggregate is a fresh copy read from the store, so it may change
                    if (click != null) {
                        list.add(click.get("page").asText());
                    }
                    return list;
                },
                (user, left, right) -> {
                    List<String> merged = new ArrayList<>(left.size() + right.size());
                    merged.addAll(left);
                    merged.addAll(right);
                    return merged;
                },
                Materialized.<String, List<String>, SessionStore<Bytes, byte[]>>as(PAGES_STORE)
                    .withKeySerde(strings)
                    .withValueSerde(pagesSerde))
            .toStream()
            .to(pages, Produced.with(windowedKey, pagesSerde));
        return builder.build();
    }

    /** {@code --job counts}: the number of clicks of each user so far (String key, Long value),
     *  written to the counts topic through the record cache. */
    static Topology countsTopology(String input, String counts) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), jsonSerde()))
            .groupByKey(Grouped.with(Serdes.String(), jsonSerde()))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("user-counts"))
            .toStream()
            .to(counts, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    static Map<String, String> options(String[] args) {
        Map<String, String> out = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --name value pairs, got " + String.join(" ", args));
            }
            out.put(args[i].substring(2), args[i + 1]);
        }
        return out;
    }

    static String required(Map<String, String> options, String name) {
        String value = options.get(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return value;
    }

    static Properties config(Map<String, String> options) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, required(options, "application-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, required(options, "bootstrap"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, required(options, "state-dir"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(options.getOrDefault("threads", "2")));
        // Kafka Streams' own default under exactly-once (100 ms); the benchmark says why
        long commitIntervalMs = Long.parseLong(options.getOrDefault("commit-interval-ms", "100"));
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitIntervalMs);
        // a transaction stays open for a commit interval: Kafka Streams refuses a transaction
        // timeout (its default under exactly-once: 10 s) below it, so a longer interval gets twice
        // the interval
        if (commitIntervalMs >= 10_000) {
            props.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG),
                      (int) (2 * commitIntervalMs));
        }
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // closed sessions are emitted on every record that advances the close time, as in
        // kspark (and Kafka Streams' TopologyTestDriver), not at most once per wall-clock
        // second (the default, 1000 ms): with the default, sessions that close during the last
        // second of a bounded input would wait for a record that never comes
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION,
                  Long.parseLong(options.getOrDefault("emit-interval-ms", "0")));
        if (options.containsKey("cache-max-bytes")) {
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, Long.parseLong(options.get("cache-max-bytes")));
        }
        return props;
    }

    static synchronized void report(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static long dropped(KafkaStreams streams) {
        double total = 0;
        for (Map.Entry<MetricName, ? extends Metric> e : streams.metrics().entrySet()) {
            MetricName name = e.getKey();
            if (name.name().equals("dropped-records-total") && name.group().equals("stream-task-metrics")) {
                Object value = e.getValue().metricValue();
                if (value instanceof Number n) {
                    total += n.doubleValue();
                }
            }
        }
        return Math.round(total);
    }

    /**
     * The same application run first on the topic {@code --warm-up-input} (outputs to the
     * output topics + "-warm-up", application id + "-warm-up"), in this JVM, until its group has
     * committed the topic's end offsets, then closed: the measured run then starts warm.
     */
    static void warmUp(Map<String, String> options, boolean emitOnClose) throws Exception {
        String input = options.get("warm-up-input");
        Properties props = config(options);
        String group = props.getProperty(StreamsConfig.APPLICATION_ID_CONFIG) + "-warm-up";
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, group);
        props.put(StreamsConfig.STATE_DIR_CONFIG, props.getProperty(StreamsConfig.STATE_DIR_CONFIG) + "-warm-up");
        Topology topology = topology(input, required(options, "counts") + "-warm-up",
                                     required(options, "pages") + "-warm-up", emitOnClose);
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG,
                                               props.get(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG)))) {
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (TopicPartitionInfo p : admin.describeTopics(List.of(input)).allTopicNames().get()
                    .get(input).partitions()) {
                latest.put(new TopicPartition(input, p.partition()), OffsetSpec.latest());
            }
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends = admin.listOffsets(latest).all().get();
            try (KafkaStreams streams = new KafkaStreams(topology, props)) {
                streams.start();
                while (true) {
                    Map<TopicPartition, OffsetAndMetadata> committed =
                        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                    boolean done = true;
                    for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e : ends.entrySet()) {
                        OffsetAndMetadata at = committed.get(e.getKey());
                        if (e.getValue().offset() > 0 && (at == null || at.offset() < e.getValue().offset())) {
                            done = false;
                        }
                    }
                    if (done) {
                        break;
                    }
                    Thread.sleep(50);
                }
                streams.close(Duration.ofSeconds(60));
            }
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = options(args);
        String emit = options.getOrDefault("emit", "close");
        if (!emit.equals("close") && !emit.equals("update")) {
            throw new IllegalArgumentException("--emit is close or update, not " + emit);
        }
        Topology topology = options.getOrDefault("job", "sessions").equals("counts")
            ? countsTopology(required(options, "input"), required(options, "counts"))
            : topology(required(options, "input"), required(options, "counts"),
                       required(options, "pages"), emit.equals("close"));
        Properties props = config(options);
        System.err.println(topology.describe());
        if (options.containsKey("warm-up-input")) {
            long started = System.currentTimeMillis();
            warmUp(options, emit.equals("close"));
            report("warmed-up " + (System.currentTimeMillis() - started));
        }
        report("created " + System.currentTimeMillis());
        KafkaStreams streams = new KafkaStreams(topology, props);
        streams.setStateListener((now, before) -> report("state " + now + " " + System.currentTimeMillis()));
        streams.setUncaughtExceptionHandler(exc -> {
            report("error " + String.valueOf(exc).replace('\n', ' '));
            exc.printStackTrace();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        while (System.in.read() != -1) {
            // runs until its standard input is closed
        }
        report("dropped " + dropped(streams));
        streams.close(Duration.ofSeconds(60));
        report("closed " + System.currentTimeMillis());
    }
}
