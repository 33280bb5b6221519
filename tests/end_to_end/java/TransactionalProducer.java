// A producer-only transactional program for the end-to-end tests: the Java client decides
// on transaction version 2 (KIP-890) from the broker's finalized features.
// Usage: TransactionalProducer <bootstrap> <topic> <transactional.id> <group>
// Runs: commit {c1, c2}; abort {a1}; commit {c3} with offsets for <group>; prints "done".

import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

public class TransactionalProducer {
    public static void main(String[] args) throws Exception {
        String topic = args[1];
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[2]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "c1"));
            producer.send(new ProducerRecord<>(topic, 0, null, "c2"));
            producer.commitTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "a1")).get();
            producer.abortTransaction();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, null, "c3"));
            producer.sendOffsetsToTransaction(
                Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(42L)),
                new ConsumerGroupMetadata(args[3]));
            producer.commitTransaction();
        }
        System.out.println("done");
    }
}
