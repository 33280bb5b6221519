/*
 * Java-client phases the kafka-tools jar cannot run against a broker without consumer groups.
 *
 * ConsumerPerformance subscribe()s (JoinGroup/SyncGroup, which kbroker does not have yet) and
 * EndToEndLatency reports whole milliseconds, so this file uses the same KafkaConsumer/
 * KafkaProducer (kafka-clients 4.3.1) with assign():
 *
 *   consume  BOOTSTRAP TOPIC COUNT              read COUNT records of partition 0 from offset 0
 *   latency  BOOTSTRAP TOPIC COUNT RATE PAYLOAD WARMUP
 *            one producer at RATE records/s (first 8 value bytes = System.nanoTime()), one consumer;
 *            µs latencies of COUNT records after WARMUP untimed ones
 *
 * Each prints one line "RESULT {json}". Client settings are the library defaults except the ones
 * named below (acks=1, linger.ms=0 for latency).
 */
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class BenchClient {
    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static void consume(String bootstrap, String topic, long count) {
        TopicPartition tp = new TopicPartition(topic, 0);
        long seen = 0, bytes = 0;
        long deadline = System.nanoTime() + 600_000_000_000L;
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap)) {
            long start = System.nanoTime();
            c.assign(List.of(tp));
            c.seek(tp, 0L);
            while (seen < count) {
                if (System.nanoTime() > deadline) throw new RuntimeException("timeout after " + seen + " records");
                ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    seen++;
                    bytes += r.value().length;
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf("RESULT {\"records\": %d, \"bytes\": %d, \"seconds\": %.6f}%n", seen, bytes, seconds);
        }
    }

    static void latency(String bootstrap, String topic, int wanted, double rate, String payloadFile, int warmup)
            throws Exception {
        final int count = wanted + warmup;
        String[] values = new String(Files.readAllBytes(Paths.get(payloadFile)), "UTF-8").split("\n");
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("acks", "1");
        pp.put("linger.ms", "0");
        pp.put("key.serializer", ByteArraySerializer.class.getName());
        pp.put("value.serializer", ByteArraySerializer.class.getName());
        TopicPartition tp = new TopicPartition(topic, 0);
        long[] lat = new long[count];
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp);
             KafkaConsumer<byte[], byte[]> c = consumer(bootstrap)) {
            c.assign(List.of(tp));
            c.seekToEnd(List.of(tp));
            c.position(tp);
            byte[] sentinel = "sentinel".getBytes("UTF-8");
            boolean ready = false;
            long readyDeadline = System.nanoTime() + 30_000_000_000L;
            while (!ready) {  // prove the consumer is positioned before timing anything
                producer.send(new ProducerRecord<>(topic, 0, null, sentinel)).get();
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofSeconds(1)))
                    ready |= Arrays.equals(r.value(), sentinel);
                if (System.nanoTime() > readyDeadline) throw new RuntimeException("consumer never saw the sentinel");
            }
            final long interval = (long) (1e9 / rate);
            Thread sender = new Thread(() -> {
                long next = System.nanoTime();
                for (int i = 0; i < count; i++) {
                    long wait = next - System.nanoTime();
                    if (wait > 0) LockSupport.parkNanos(wait);
                    byte[] v = values[i % values.length].getBytes(java.nio.charset.StandardCharsets.UTF_8);
                    ByteBuffer.wrap(v).putLong(0, System.nanoTime());
                    producer.send(new ProducerRecord<>(topic, 0, null, v));
                    next += interval;
                }
                producer.flush();
            });
            sender.start();
            int got = 0;
            long deadline = System.nanoTime() + (long) (count / rate * 1e9) + 60_000_000_000L;
            while (got < count && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    long now = System.nanoTime();
                    if (r.value().length < 8 || Arrays.equals(r.value(), sentinel)) continue;
                    if (got < count) lat[got++] = (now - ByteBuffer.wrap(r.value()).getLong(0)) / 1000;
                }
            }
            sender.join();
            if (got < count) throw new RuntimeException("received " + got + " of " + count);
        }
        StringBuilder sb = new StringBuilder("RESULT {\"records\": ").append(wanted)
            .append(", \"bytes\": ").append((long) wanted * values[0].length()).append(", \"latencies_us\": [");
        for (int i = warmup; i < count; i++) sb.append(i == warmup ? "" : ",").append(lat[i]);
        System.out.println(sb.append("]}"));
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "consume" -> consume(args[1], args[2], Long.parseLong(args[3]));
            case "latency" -> latency(args[1], args[2], Integer.parseInt(args[3]), Double.parseDouble(args[4]), args[5],
                Integer.parseInt(args[6]));
            default -> throw new IllegalArgumentException("mode: consume | latency");
        }
        System.exit(0);
    }
}
