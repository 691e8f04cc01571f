package kspark.anchor;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyWindowStore;
import org.apache.kafka.streams.state.Stores;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The restore of {@code benchmarks/restore_changelog.py} in Kafka Streams: an application whose
 * only state is a persistent window store (RocksDB, Kafka Streams' default) logged to a
 * changelog topic that already holds the records, so that starting it on an empty state
 * directory restores the store from that topic. The application id and the store's name give
 * the topic's name ({@code <application id>-<store>-changelog}); the topology reads an empty
 * input topic of as many partitions as the changelog (one task per changelog partition).
 *
 * <p>Usage: {@code RestoreWindowStore <bootstrap> <application id> <store> <input topic>
 * <state dir> <retention ms> <window size ms> <threads>}. Prints one line: {@code restored
 * <records> <seconds from start() to RUNNING> <seconds from the first restore's start to the
 * last one's end> <windows in the store>}.
 */
public final class RestoreWindowStore {
    private RestoreWindowStore() {
    }

    public static void main(final String[] args) throws Exception {
        if (args.length != 8) {
            System.err.println("usage: RestoreWindowStore <bootstrap> <application id> <store> "
                    + "<input topic> <state dir> <retention ms> <window size ms> <threads>");
            System.exit(2);
        }
        final String store = args[2];
        final Topology topology = new Topology();
        topology.addSource("events", Serdes.String().deserializer(),
                Serdes.ByteArray().deserializer(), args[3]);
        topology.addProcessor("reader", () -> new Processor<String, byte[], Void, Void>() {
            @Override
            public void process(final Record<String, byte[]> record) {
            }
        }, "events");
        topology.addStateStore(Stores.windowStoreBuilder(
                Stores.persistentWindowStore(store, Duration.ofMillis(Long.parseLong(args[5])),
                        Duration.ofMillis(Long.parseLong(args[6])), false),
                Serdes.String(), Serdes.ByteArray()), "reader");

        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(args[7]));

        final AtomicLong restored = new AtomicLong();
        final AtomicLong firstStart = new AtomicLong(Long.MAX_VALUE);
        final AtomicLong lastEnd = new AtomicLong();
        final CountDownLatch running = new CountDownLatch(1);
        try (KafkaStreams streams = new KafkaStreams(topology, props)) {
            streams.setGlobalStateRestoreListener(new StateRestoreListener() {
                @Override
                public void onRestoreStart(final TopicPartition partition, final String name,
                                           final long startingOffset, final long endingOffset) {
                    firstStart.accumulateAndGet(System.nanoTime(), Math::min);
                }

                @Override
                public void onBatchRestored(final TopicPartition partition, final String name,
                                            final long batchEndOffset, final long numRestored) {
                }

                @Override
                public void onRestoreEnd(final TopicPartition partition, final String name,
                                         final long totalRestored) {
                    restored.addAndGet(totalRestored);
                    lastEnd.accumulateAndGet(System.nanoTime(), Math::max);
                }
            });
            streams.setStateListener((now, before) -> {
                if (now == KafkaStreams.State.RUNNING) {
                    running.countDown();
                }
            });
            final long t0 = System.nanoTime();
            streams.start();
            if (!running.await(600, TimeUnit.SECONDS)) {
                throw new IllegalStateException("Kafka Streams did not reach RUNNING in 600 s");
            }
            final double toRunning = (System.nanoTime() - t0) / 1e9;
            final ReadOnlyWindowStore<String, byte[]> view = streams.store(
                    StoreQueryParameters.fromNameAndType(store, QueryableStoreTypes.windowStore()));
            long windows = 0;
            try (KeyValueIterator<Windowed<String>, byte[]> all = view.all()) {
                while (all.hasNext()) {
                    all.next();
                    windows++;
                }
            }
            final double restoring =
                    lastEnd.get() > 0 ? (lastEnd.get() - firstStart.get()) / 1e9 : 0;
            System.out.printf("restored %d %.3f %.3f %d%n", restored.get(), toRunning, restoring,
                    windows);
            System.out.flush();
        }
    }
}
