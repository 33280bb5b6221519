// A transactional producer for the cluster tests: the Java client uses transaction version 2
// (KIP-890: Produce v12+ adds partitions implicitly, TxnOffsetCommit v5, EndTxn v5 with epoch bumps).
// Usage: ClusterTransactionalProducer <bootstrap> <topic> <transactional.id> <group> <partitions>
// Runs transactions 0..6, each one record "<n>-<p>" per partition: 2 and 5 are aborted (after
// their records are written), 6 also commits offset 42 of <topic>-0 for <group>; prints "done".

import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

public class ClusterTransactionalProducer {
    public static void main(String[] args) throws Exception {
        String topic = args[1];
        int partitions = Integer.parseInt(args[4]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[2]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            for (int n = 0; n <= 6; n++) {
                producer.beginTransaction();
                for (int p = 0; p < partitions; p++) {
                    producer.send(new ProducerRecord<>(topic, p, null, n + "-" + p));
                }
                producer.flush();
                if (n == 2 || n == 5) {
                    producer.abortTransaction();
                    continue;
                }
                if (n == 6) {
                    producer.sendOffsetsToTransaction(
                        Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(42L)),
                        new ConsumerGroupMetadata(args[3]));
                }
                producer.commitTransaction();
            }
        }
        System.out.println("done");
    }
}
