import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.LinkedBlockingQueue;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One Java consumer in a group, driven over stdin/stdout by tests/end_to_end/test_consumer_groups.py.
 *
 * Arguments: bootstrap group.id group.protocol ("consumer" or "classic") and either "topics:a,b"
 * or "regex:pattern" (a KIP-848 broker-side regex, SubscriptionPattern), then optionally any
 * number of "key=value" consumer properties (e.g. session.timeout.ms for a classic group). It prints
 * "assignment t-p,t-p" whenever its assignment changes and "record topic partition offset value"
 * per record; stdin commands: "commit" (commitSync, then "committed") and "close" (then "closed").
 */
public final class GroupConsumer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("group.protocol", args[2]);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        for (int i = 4; i < args.length; i++) {
            String[] property = args[i].split("=", 2);
            props.put(property[0], property[1]);
        }
        LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null) {
                    commands.add(line.trim());
                }
            } catch (java.io.IOException e) {
                // the test went away: close as if told to
            }
            commands.add("close");
        });
        reader.setDaemon(true);
        reader.start();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            String subscription = args[3];
            if (subscription.startsWith("regex:")) {
                consumer.subscribe(new SubscriptionPattern(subscription.substring(6)));
            } else {
                consumer.subscribe(Arrays.asList(subscription.substring(7).split(",")));
            }
            String last = null;
            while (true) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    System.out.println("record " + r.topic() + " " + r.partition() + " " + r.offset() + " " + r.value());
                }
                Set<String> names = new TreeSet<>();
                for (TopicPartition tp : consumer.assignment()) {
                    names.add(tp.topic() + "-" + tp.partition());
                }
                String now = String.join(",", names);
                if (!now.equals(last)) {
                    System.out.println("assignment " + now);
                    last = now;
                }
                String command = commands.poll();
                if ("commit".equals(command)) {
                    consumer.commitSync();
                    System.out.println("committed");
                } else if ("close".equals(command)) {
                    break;
                }
                System.out.flush();
            }
        }
        System.out.println("closed");
        System.out.flush();
    }
}
