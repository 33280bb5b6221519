/*
 * The Java client stack for the compat suite, as one long-lived JVM (a JVM start costs ~1 s).
 *
 * Reads one JSON request per line on stdin and answers one JSON line on the original stdout:
 * {"ok": value} or {"fail": "what broke"}. Operations use kafka-clients' public Admin,
 * KafkaProducer and KafkaConsumer APIs ("op" = create_topic, produce, consume, ...), or run a
 * Kafka CLI tool's main class in this JVM ("op" = "cli") with System.in/out/err redirected and
 * Exit.exit turned into a returned status. Expected Kafka errors are values
 * ({"error": "TOPIC_ALREADY_EXISTS"}), named by org.apache.kafka.common.protocol.Errors.
 * Bytes travel base64-encoded. Compiled once per session by compat/clients/java.py.
 */
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.*;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.UnknownServerException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.utils.Exit;

public final class CompatDriver {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Map<String, Admin> ADMINS = new HashMap<>();
    static final long TIMEOUT_MS = 20000;

    static final class ExitCalled extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final int status;
        ExitCalled(int status) { super("exit " + status); this.status = status; }
    }

    // The running CLI tool's output and the first Exit.exit status it asked for. A tool may
    // catch the ExitCalled we throw and print more; a real JVM would be gone by then, so the
    // output is cut where exit was called.
    static ByteArrayOutputStream cliOut, cliErr;
    static Integer exitStatus;
    static final List<Runnable> HOOKS = new ArrayList<>();
    static int outMark, errMark;

    static void exitCalled(int status) {
        if (exitStatus == null && cliOut != null) {
            System.out.flush();
            System.err.flush();
            exitStatus = status;
            outMark = cliOut.size();
            errMark = cliErr.size();
        }
        throw new ExitCalled(status);
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.setOut(System.err);  // nothing but answers on the protocol channel
        Exit.setExitProcedure((status, message) -> exitCalled(status));
        Exit.setHaltProcedure((status, message) -> exitCalled(status));
        Exit.setShutdownHookAdder((name, hook) -> { if (cliOut != null) HOOKS.add(hook); });
        out.println("{\"ready\": true}");
        String line;
        while ((line = in.readLine()) != null) {
            ObjectNode answer = JSON.createObjectNode();
            try {
                answer.set("ok", dispatch(JSON.readTree(line)));
            } catch (Throwable e) {
                StringWriter trace = new StringWriter();
                e.printStackTrace(new PrintWriter(trace));
                answer.put("fail", trace.toString());
            }
            out.println(JSON.writeValueAsString(answer));
        }
        for (Admin admin : ADMINS.values()) admin.close(Duration.ofSeconds(5));
    }

    static JsonNode dispatch(JsonNode r) throws Exception {
        String op = r.get("op").asText();
        if (op.equals("cli")) return cli(r);
        String bootstrap = r.get("bootstrap").asText();
        switch (op) {
            case "produce": return produce(bootstrap, r);
            case "connect": return connect(bootstrap, r);
            case "consume": return consume(bootstrap, r);
            case "txn": return txn(bootstrap, r);
            case "member": return member(bootstrap, r);
            default: break;
        }
        Admin admin = ADMINS.computeIfAbsent(bootstrap, b -> Admin.create(Map.of(
            AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, b,
            AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) TIMEOUT_MS,
            AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) TIMEOUT_MS)));
        try {
            return AdminOps.run(admin, op, r);
        } catch (ExecutionException e) {
            return error(e.getCause());
        }
    }

    /** {"error": NAME} for a Kafka error, the exception class for anything else. */
    static ObjectNode error(Throwable e) {
        while ((e instanceof ExecutionException || e instanceof KafkaException && !(e instanceof
                org.apache.kafka.common.errors.ApiException)) && e.getCause() != null) {
            e = e.getCause();
        }
        Errors code = Errors.forException(e);
        String name = code == Errors.UNKNOWN_SERVER_ERROR && !(e instanceof UnknownServerException)
            ? e.getClass().getSimpleName() : code.name();
        ObjectNode node = JSON.createObjectNode();
        node.put("error", name);
        return node;
    }

    /** A throwaway Admin with "props" (security settings) lists topics once: null when answered,
     *  else {"error": NAME, "message": what the exception says} (an authentication or TLS failure). */
    static JsonNode connect(String bootstrap, JsonNode r) throws Exception {
        Properties p = props(bootstrap, r.get("props"));
        p.putIfAbsent(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        p.putIfAbsent(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        try (Admin admin = Admin.create(p)) {
            admin.listTopics().names().get(15, TimeUnit.SECONDS);
            return NullNode.getInstance();
        } catch (ExecutionException e) {
            ObjectNode node = error(e.getCause());
            node.put("message", e.getCause().getMessage());
            return node;
        }
    }

    static byte[] bytes(JsonNode n) {
        return n == null || n.isNull() ? null : Base64.getDecoder().decode(n.asText());
    }

    static String b64(byte[] b) {
        return b == null ? null : Base64.getEncoder().encodeToString(b);
    }

    static Properties props(String bootstrap, JsonNode extra) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        if (extra != null) extra.properties().forEach(f -> p.put(f.getKey(), f.getValue().asText()));
        return p;
    }

    static JsonNode produce(String bootstrap, JsonNode r) throws Exception {
        Properties p = props(bootstrap, r.get("props"));
        p.putIfAbsent("linger.ms", "5");
        p.putIfAbsent("delivery.timeout.ms", "15000");
        p.putIfAbsent("request.timeout.ms", "10000");
        ArrayNode results = JSON.createArrayNode();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p,
                new org.apache.kafka.common.serialization.ByteArraySerializer(),
                new org.apache.kafka.common.serialization.ByteArraySerializer())) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (JsonNode rec : r.get("records")) {
                RecordHeaders headers = new RecordHeaders();
                for (JsonNode h : rec.get("headers")) headers.add(h.get(0).asText(), bytes(h.get(1)));
                Integer partition = rec.get("partition").isNull() ? null : rec.get("partition").asInt();
                Long ts = rec.get("timestamp").isNull() ? null : rec.get("timestamp").asLong();
                ProducerRecord<byte[], byte[]> pr = new ProducerRecord<>(r.get("topic").asText(), partition, ts,
                    bytes(rec.get("key")), bytes(rec.get("value")), headers);
                try {
                    futures.add(producer.send(pr));
                } catch (KafkaException e) {
                    futures.add(null);
                    results.add(error(e));
                }
                if (r.path("sync").asBoolean(false) && futures.get(futures.size() - 1) != null) {
                    producer.flush();
                }
            }
            producer.flush();
            ArrayNode ordered = JSON.createArrayNode();
            int failedEarly = 0;
            for (Future<RecordMetadata> f : futures) {
                if (f == null) { ordered.add(results.get(failedEarly++)); continue; }
                try {
                    RecordMetadata md = f.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    ordered.add(md.hasOffset() ? md.offset() : -1L);
                } catch (ExecutionException e) {
                    ordered.add(error(e.getCause()));
                }
            }
            return ordered;
        }
    }

    // Transactional producers by the handle "txn" requests name them with ("init" makes one).
    static final Map<String, KafkaProducer<byte[], byte[]>> TXN_PRODUCERS = new HashMap<>();

    static ProducerRecord<byte[], byte[]> producerRecord(String topic, JsonNode rec) {
        RecordHeaders headers = new RecordHeaders();
        for (JsonNode h : rec.get("headers")) headers.add(h.get(0).asText(), bytes(h.get(1)));
        Integer partition = rec.get("partition").isNull() ? null : rec.get("partition").asInt();
        Long ts = rec.get("timestamp").isNull() ? null : rec.get("timestamp").asLong();
        return new ProducerRecord<>(topic, partition, ts, bytes(rec.get("key")), bytes(rec.get("value")), headers);
    }

    /** A transactional KafkaProducer's steps: "step" = init | begin | send | commit | abort | close;
     *  null on success, {"error": NAME} on a Kafka error; send answers one offset or error per record. */
    static JsonNode txn(String bootstrap, JsonNode r) throws Exception {
        String handle = r.get("handle").asText(), step = r.get("step").asText();
        if (step.equals("init")) {
            Properties p = props(bootstrap, r.get("props"));
            p.putIfAbsent("linger.ms", "5");
            p.putIfAbsent("delivery.timeout.ms", "15000");
            p.putIfAbsent("request.timeout.ms", "10000");
            p.putIfAbsent("max.block.ms", "15000");
            KafkaProducer<byte[], byte[]> old = TXN_PRODUCERS.put(handle, new KafkaProducer<>(p,
                new org.apache.kafka.common.serialization.ByteArraySerializer(),
                new org.apache.kafka.common.serialization.ByteArraySerializer()));
            if (old != null) old.close(Duration.ZERO);
        }
        KafkaProducer<byte[], byte[]> producer = TXN_PRODUCERS.get(handle);
        try {
            switch (step) {
                case "init": producer.initTransactions(); return NullNode.getInstance();
                case "begin": producer.beginTransaction(); return NullNode.getInstance();
                case "commit": producer.commitTransaction(); return NullNode.getInstance();
                case "abort": producer.abortTransaction(); return NullNode.getInstance();
                case "close":
                    TXN_PRODUCERS.remove(handle);
                    producer.close(Duration.ofSeconds(5));
                    return NullNode.getInstance();
                case "send": break;
                default: throw new IllegalArgumentException("txn step " + step);
            }
        } catch (KafkaException e) {
            return error(e);
        }
        List<Object> futures = new ArrayList<>();
        for (JsonNode rec : r.get("records")) {
            try {
                futures.add(producer.send(producerRecord(r.get("topic").asText(), rec)));
            } catch (KafkaException | IllegalStateException e) {
                futures.add(error(e));
            }
        }
        producer.flush();
        ArrayNode ordered = JSON.createArrayNode();
        for (Object f : futures) {
            if (f instanceof JsonNode n) { ordered.add(n); continue; }
            try {
                RecordMetadata md = (RecordMetadata) ((Future<?>) f).get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
                ordered.add(md.hasOffset() ? md.offset() : -1L);
            } catch (ExecutionException e) {
                ordered.add(error(e.getCause()));
            }
        }
        return ordered;
    }

    static JsonNode consume(String bootstrap, JsonNode r) {
        Properties p = props(bootstrap, r.get("props"));
        p.putIfAbsent("enable.auto.commit", "false");
        String topic = r.get("topic").asText();
        List<TopicPartition> tps = new ArrayList<>();
        for (JsonNode n : r.get("partitions")) tps.add(new TopicPartition(topic, n.asInt()));
        ArrayNode records = JSON.createArrayNode();
        ObjectNode result = JSON.createObjectNode();
        result.set("records", records);
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p,
                new org.apache.kafka.common.serialization.ByteArrayDeserializer(),
                new org.apache.kafka.common.serialization.ByteArrayDeserializer());
        try {
            consumer.assign(tps);
            JsonNode start = r.get("start");
            if (start.isTextual() && start.asText().equals("earliest")) consumer.seekToBeginning(tps);
            else if (start.isTextual() && start.asText().equals("latest")) consumer.seekToEnd(tps);
            else if (start.isObject()) {
                Map<TopicPartition, Long> query = new HashMap<>();
                for (TopicPartition tp : tps) query.put(tp, start.get("timestamp").asLong());
                for (Map.Entry<TopicPartition, OffsetAndTimestamp> e : consumer.offsetsForTimes(query).entrySet()) {
                    if (e.getValue() == null) consumer.seekToEnd(List.of(e.getKey()));
                    else consumer.seek(e.getKey(), e.getValue().offset());
                }
            } else if (start.isNumber()) {
                for (TopicPartition tp : tps) consumer.seek(tp, start.asLong());
            }
            JsonNode until = r.get("until");
            int max = r.path("max_records").asInt(Integer.MAX_VALUE);
            long deadline = System.currentTimeMillis() + r.path("timeout_ms").asLong(TIMEOUT_MS);
            while (System.currentTimeMillis() < deadline && records.size() < max) {
                if (until != null && !until.isNull()) {
                    boolean done = true;
                    for (TopicPartition tp : tps) {
                        JsonNode end = until.get(String.valueOf(tp.partition()));
                        if (end != null && consumer.position(tp) < end.asLong()) done = false;
                    }
                    if (done) break;
                }
                if (r.path("until_moved").asBoolean(false)) {
                    boolean moved = true;
                    for (TopicPartition tp : tps) if (consumer.position(tp) == start.asLong()) moved = false;
                    if (moved) break;
                }
                for (ConsumerRecord<byte[], byte[]> rec : consumer.poll(Duration.ofMillis(100))) {
                    ObjectNode o = records.addObject();
                    o.put("partition", rec.partition());
                    o.put("offset", rec.offset());
                    o.put("key", b64(rec.key()));
                    o.put("value", b64(rec.value()));
                    ArrayNode hs = o.putArray("headers");
                    for (Header h : rec.headers()) hs.addArray().add(h.key()).add(b64(h.value()));
                    o.put("timestamp", rec.timestamp());
                    o.put("timestamp_type", rec.timestampType().name);
                }
            }
            while (records.size() > max) records.remove(records.size() - 1);
            ObjectNode positions = result.putObject("positions");
            for (TopicPartition tp : tps) positions.put(String.valueOf(tp.partition()), consumer.position(tp));
        } catch (KafkaException e) {
            result.set("error", error(e).get("error"));
        } finally {
            // Do not wait for the prefetch in flight (a long poll can hold close() for
            // fetch.max.wait.ms); the records we report have all arrived.
            consumer.close(CloseOptions.timeout(Duration.ZERO));
        }
        return result;
    }

    // Group members (KafkaConsumer.subscribe) by the handle "member" requests name them with.
    static final Map<String, KafkaConsumer<byte[], byte[]>> MEMBERS = new HashMap<>();

    /** A subscribed KafkaConsumer's steps: "step" = open | poll | assignment | positions | commit |
     *  committed | close. open: props (group.id, group.protocol, ...) and topic, and "assign" (a
     *  list of partitions to assign instead of subscribing, or null); poll: records
     *  within timeout_ms; commit: {partition: [offset, metadata]}; committed: partitions. */
    static JsonNode member(String bootstrap, JsonNode r) {
        String handle = r.get("handle").asText(), step = r.get("step").asText(), topic = r.get("topic").asText();
        if (step.equals("open")) {
            Properties p = props(bootstrap, r.get("props"));
            p.putIfAbsent("enable.auto.commit", "false");
            p.putIfAbsent("auto.offset.reset", "earliest");
            KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p,
                new org.apache.kafka.common.serialization.ByteArrayDeserializer(),
                new org.apache.kafka.common.serialization.ByteArrayDeserializer());
            JsonNode assign = r.get("assign");
            if (assign == null || assign.isNull()) c.subscribe(List.of(topic));
            else {  // a consumer that assigns its partitions: it never joins the group
                List<TopicPartition> tps = new ArrayList<>();
                for (JsonNode n : assign) tps.add(new TopicPartition(topic, n.asInt()));
                c.assign(tps);
            }
            MEMBERS.put(handle, c);
            return NullNode.getInstance();
        }
        KafkaConsumer<byte[], byte[]> c = MEMBERS.get(handle);
        try {
            switch (step) {
                case "poll": {
                    ArrayNode records = JSON.createArrayNode();
                    for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(r.get("timeout_ms").asLong()))) {
                        ObjectNode o = records.addObject();
                        o.put("partition", rec.partition());
                        o.put("offset", rec.offset());
                        o.put("key", b64(rec.key()));
                        o.put("value", b64(rec.value()));
                        ArrayNode hs = o.putArray("headers");
                        for (Header h : rec.headers()) hs.addArray().add(h.key()).add(b64(h.value()));
                        o.put("timestamp", rec.timestamp());
                        o.put("timestamp_type", rec.timestampType().name);
                    }
                    return records;
                }
                case "assignment": {
                    ArrayNode out = JSON.createArrayNode();
                    new TreeSet<>(c.assignment().stream().map(TopicPartition::partition).toList()).forEach(out::add);
                    return out;
                }
                case "positions": {
                    ObjectNode out = JSON.createObjectNode();
                    for (TopicPartition tp : c.assignment()) out.put(String.valueOf(tp.partition()), c.position(tp));
                    return out;
                }
                case "commit": {
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    r.get("offsets").properties().forEach(f -> offsets.put(new TopicPartition(topic,
                        Integer.parseInt(f.getKey())), new OffsetAndMetadata(f.getValue().get(0).asLong(),
                        f.getValue().get(1).asText())));
                    c.commitSync(offsets);
                    return NullNode.getInstance();
                }
                case "committed": {
                    List<TopicPartition> tps = new ArrayList<>();
                    for (JsonNode n : r.get("partitions")) tps.add(new TopicPartition(topic, n.asInt()));
                    Map<TopicPartition, OffsetAndMetadata> got = c.committed(new HashSet<>(tps));
                    ObjectNode out = JSON.createObjectNode();
                    for (TopicPartition tp : tps) {
                        OffsetAndMetadata o = got.get(tp);
                        String key = String.valueOf(tp.partition());
                        if (o == null) out.putNull(key);
                        else out.putArray(key).add(o.offset()).add(o.metadata());
                    }
                    return out;
                }
                case "close":
                    MEMBERS.remove(handle);
                    c.close(CloseOptions.timeout(Duration.ofSeconds(5)));
                    return NullNode.getInstance();
                default: throw new IllegalArgumentException("member step " + step);
            }
        } catch (KafkaException e) {
            return error(e);
        }
    }

    /** Runs a CLI tool's main(String[]) in this JVM; returns exit status, stdout and stderr. */
    static JsonNode cli(JsonNode r) throws Exception {
        List<String> args = new ArrayList<>();
        for (JsonNode a : r.get("args")) args.add(a.asText());
        cliOut = new ByteArrayOutputStream();
        cliErr = new ByteArrayOutputStream();
        exitStatus = null;
        HOOKS.clear();
        PrintStream oldOut = System.out, oldErr = System.err;
        InputStream oldIn = System.in;
        int status = 0;
        try {
            System.setOut(new PrintStream(cliOut, true, "UTF-8"));
            System.setErr(new PrintStream(cliErr, true, "UTF-8"));
            System.setIn(new ByteArrayInputStream(r.path("stdin").asText("").getBytes(StandardCharsets.UTF_8)));
            Method main = Class.forName(r.get("main").asText()).getMethod("main", String[].class);
            main.invoke(null, (Object) args.toArray(new String[0]));
        } catch (java.lang.reflect.InvocationTargetException e) {
            if (!(e.getCause() instanceof ExitCalled)) {
                status = 1;  // an uncaught exception ends a JVM with status 1
                e.getCause().printStackTrace(System.err);
            }
        } finally {
            System.out.flush();
            System.err.flush();
        }
        byte[] out = cliOut.toByteArray(), err = cliErr.toByteArray();
        if (exitStatus != null) {
            status = exitStatus;
            out = Arrays.copyOf(out, outMark);
            err = Arrays.copyOf(err, errMark);
        }
        // What a JVM does on exit: run the shutdown hooks the tool registered (e.g. the console
        // producer closes, i.e. flushes, its producer there), their output still the tool's.
        ByteArrayOutputStream hookOut = new ByteArrayOutputStream(), hookErr = new ByteArrayOutputStream();
        hookOut.writeBytes(out);
        hookErr.writeBytes(err);
        cliOut = cliErr = null;
        System.setOut(new PrintStream(hookOut, true, "UTF-8"));
        System.setErr(new PrintStream(hookErr, true, "UTF-8"));
        try {
            for (Runnable hook : new ArrayList<>(HOOKS)) {
                try { hook.run(); } catch (RuntimeException e) { e.printStackTrace(System.err); }
            }
        } finally {
            HOOKS.clear();
            System.out.flush();
            System.err.flush();
            System.setOut(oldOut);
            System.setErr(oldErr);
            System.setIn(oldIn);
        }
        out = hookOut.toByteArray();
        err = hookErr.toByteArray();
        ObjectNode result = JSON.createObjectNode();
        result.put("exit", status);
        result.put("stdout", new String(out, StandardCharsets.UTF_8));
        result.put("stderr", new String(err, StandardCharsets.UTF_8));
        return result;
    }
}
