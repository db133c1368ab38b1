import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;

/**
 * The JSON lines a Kafka Streams application prints for the one that drives it (StreamsRehearsalApp,
 * and the test suite's CountStreamsApp, which is compiled with this directory's sources).
 *
 * Rules:
 * - one JSON object per line on stdout, each with "event" and "t" (System.nanoTime(),
 *   CLOCK_MONOTONIC on Linux: the driver compares times across processes), flushed at once;
 *   lines never interleave (say is synchronized);
 * - "state" lines are KafkaStreams state transitions; "fatal" an uncaught exception in a stream
 *   thread, after which the client shuts down (watch);
 * - "active" lines (ActiveLife, "phase" "open" or "close", "task"): an active task's own
 *   lifetime, printed on its stream thread by a pass-through processor the application puts in
 *   each subtopology, once (processValues). "open" when Streams initializes the task's processors,
 *   after the assignment gave it the task and its state is restored, before its first record
 *   (StreamTask.completeRestoration); "close" when it closes them, as it suspends the task
 *   (StreamTask.suspend, before any close or recycle), after its last record. A revoked task is
 *   suspended inside the revocation callback, which completes before the member acknowledges
 *   the revocation, the acknowledgement a coordinator must see before it gives the task to
 *   another member: between "open" and "close" the instance surely owned the task. (A lost
 *   task, the member fenced, closes when the member learns it.) Standby tasks have no
 *   processors, so no lines.
 * - "tasks" lines (TaskLines): the instance's active tasks (and standby tasks, when asked) as
 *   its stream threads see them (KafkaStreams.metadataForLocalThreads()), polled and printed on
 *   change; "prev_t" is when the poll before started. None is printed once the client is
 *   closed. A thread's metadata is refreshed only when the thread enters RUNNING
 *   (StreamThread.setState), so a revoked task stays in it until the thread's next assignment
 *   is running, and a new task appears only once all of the thread's tasks are restored: these
 *   lines say what the instance runs once stable, not when a task changed hands (the
 *   "active" lines do).
 * - "gap" lines (off unless the application sets gapNs): a stream thread processed a record
 *   more than gapNs after its previous one (any ActiveLife of the thread, so any task of any
 *   subtopology); "from" is that previous record's time, "t" this one's, "thread" the thread.
 *   With input flowing to every task, they are the thread's processing pauses: a rebalance
 *   benchmark reads an instance's longest pause from them (bench/bench_streams_rebalance.py).
 */
final class StreamsEvents {
    private StreamsEvents() {
    }

    /** The processing gap worth a "gap" line, ns; 0: none printed (the rules above). */
    static volatile long gapNs;
    private static final ThreadLocal<long[]> LAST_RECORD = ThreadLocal.withInitial(() -> new long[1]);

    /** A record processed on this thread now: a "gap" line if the previous one was over gapNs ago. */
    static void processed() {
        long threshold = gapNs;
        if (threshold <= 0) {
            return;
        }
        long now = System.nanoTime();
        long[] last = LAST_RECORD.get();
        if (last[0] != 0 && now - last[0] > threshold) {
            say("gap", "\"from\":" + last[0] + ",\"thread\":" + q(Thread.currentThread().getName()));
        }
        last[0] = now;
    }

    /** "--name value" pairs, without the dashes. */
    static Map<String, String> options(String[] argv) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            opts.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        return opts;
    }

    /** "state" lines for the client's transitions; "fatal" and SHUTDOWN_CLIENT for an uncaught exception. */
    static void watch(KafkaStreams streams) {
        streams.setStateListener((now, before) ->
            say("state", "\"state\":" + q(now.name()) + ",\"from\":" + q(before.name())));
        streams.setUncaughtExceptionHandler(e -> {
            say("fatal", "\"error\":" + q(e.getClass().getName()) + ",\"message\":" + q(String.valueOf(e.getMessage())));
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    }

    /** The local threads' task sets, printed as "tasks" lines whenever they change. */
    static final class TaskLines {
        private final boolean withStandby;
        private final String none;
        private String last;
        private long lastPoll = System.nanoTime();
        private boolean closed;

        TaskLines(boolean withStandby) {
            this.withStandby = withStandby;
            this.none = withStandby ? "\"active\":[],\"standby\":[]" : "\"active\":[]";
            this.last = none;
        }

        /** Poll every ``everyMs`` on a daemon thread. */
        void start(KafkaStreams streams, long everyMs) {
            Thread poller = new Thread(() -> poll(streams, everyMs), "task-poller");
            poller.setDaemon(true);
            poller.start();
        }

        private void poll(KafkaStreams streams, long everyMs) {
            while (true) {
                long pollStart = System.nanoTime();
                try {
                    TreeSet<String> active = new TreeSet<>();
                    TreeSet<String> standby = new TreeSet<>();
                    for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                        for (TaskMetadata task : thread.activeTasks()) {
                            active.add(task.taskId().toString());
                        }
                        for (TaskMetadata task : thread.standbyTasks()) {
                            standby.add(task.taskId().toString());
                        }
                    }
                    observed("\"active\":" + strings(active) + (withStandby ? ",\"standby\":" + strings(standby) : ""),
                        pollStart);
                } catch (RuntimeException e) {
                    // metadataForLocalThreads() throws once the client is neither running nor
                    // rebalancing (closing, failed): it holds no task the driver could count on.
                    observed(none, pollStart);
                }
                try {
                    Thread.sleep(everyMs);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }

        /** The client is closed: its last poll was the last sight of its tasks; no poll counts after. */
        synchronized void closed() {
            observed(none, System.nanoTime());
            closed = true;
        }

        /** One poll's sets: a "tasks" line if they changed; prev_t is the previous poll's start. */
        private synchronized void observed(String tasks, long pollStart) {
            if (closed) {
                return;
            }
            if (!tasks.equals(last)) {
                say("tasks", tasks + ",\"prev_t\":" + lastPoll);
                last = tasks;
            }
            lastPoll = pollStart;
        }
    }

    /** Passes records on unchanged; prints its task's "active" open and close (see the rules). */
    static final class ActiveLife<K, V> implements FixedKeyProcessor<K, V, V> {
        private FixedKeyProcessorContext<K, V> context;

        @Override
        public void init(FixedKeyProcessorContext<K, V> context) {
            this.context = context;
            say("active", "\"phase\":\"open\",\"task\":" + q(context.taskId().toString()));
        }

        @Override
        public void process(FixedKeyRecord<K, V> record) {
            processed();
            context.forward(record);
        }

        @Override
        public void close() {
            say("active", "\"phase\":\"close\",\"task\":" + q(context.taskId().toString()));
        }
    }

    /** A JSON array of the strings, in the collection's order. */
    static String strings(Collection<String> items) {
        List<String> quoted = new ArrayList<>();
        items.forEach(s -> quoted.add(q(s)));
        return "[" + String.join(",", quoted) + "]";
    }

    /** A JSON string. */
    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static synchronized void say(String event, String fields) {
        System.out.println("{\"event\":" + q(event) + ",\"t\":" + System.nanoTime()
            + (fields.isEmpty() ? "" : "," + fields) + "}");
        System.out.flush();
    }
}
