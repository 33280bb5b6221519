/*
 * The Admin-client operations of CompatDriver: one method per compat client operation, each
 * answering a plain JSON value built from kafka-clients' public Admin API results.
 */
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.*;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.*;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.config.ConfigResource;

final class AdminOps {
    static final long T = CompatDriver.TIMEOUT_MS;

    static JsonNode run(Admin admin, String op, JsonNode r) throws Exception {
        switch (op) {
            case "create_topic": return createTopic(admin, r);
            case "delete_topic":
                admin.deleteTopics(List.of(r.get("name").asText())).all().get(T, TimeUnit.MILLISECONDS);
                return NullNode.instance;
            case "create_partitions":
                admin.createPartitions(Map.of(r.get("name").asText(), NewPartitions.increaseTo(r.get("total").asInt())),
                    new CreatePartitionsOptions().validateOnly(r.path("validate_only").asBoolean(false)))
                    .all().get(T, TimeUnit.MILLISECONDS);
                return NullNode.instance;
            case "describe_topic": return describeTopic(admin, r.get("name").asText());
            case "list_topics": {
                ArrayNode names = CompatDriver.JSON.createArrayNode();
                new TreeSet<>(admin.listTopics(new ListTopicsOptions().listInternal(true)).names()
                    .get(T, TimeUnit.MILLISECONDS)).forEach(names::add);
                return names;
            }
            case "internal_topics": {  // the topics Metadata flags internal (TopicListing.isInternal)
                ArrayNode names = CompatDriver.JSON.createArrayNode();
                admin.listTopics(new ListTopicsOptions().listInternal(true)).listings()
                    .get(T, TimeUnit.MILLISECONDS).stream().filter(TopicListing::isInternal)
                    .map(TopicListing::name).sorted().forEach(names::add);
                return names;
            }
            case "describe_cluster": return describeCluster(admin);
            case "describe_configs": return describeConfigs(admin, r);
            case "alter_configs": return alterConfigs(admin, r);
            case "list_offsets": return listOffsets(admin, r);
            case "delete_records": {
                TopicPartition tp = new TopicPartition(r.get("topic").asText(), r.get("partition").asInt());
                DeletedRecords d = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(r.get("before").asLong())))
                    .lowWatermarks().get(tp).get(T, TimeUnit.MILLISECONDS);
                return CompatDriver.JSON.getNodeFactory().numberNode(d.lowWatermark());
            }
            case "list_groups": {
                ArrayNode out = CompatDriver.JSON.createArrayNode();
                List<GroupListing> all = new ArrayList<>(admin.listGroups().all().get(T, TimeUnit.MILLISECONDS));
                all.sort(Comparator.comparing(GroupListing::groupId));
                for (GroupListing g : all) {
                    out.addArray().add(g.groupId()).add(g.groupState().map(Object::toString).orElse(null))
                        .add(g.type().map(Object::toString).orElse(null)).add(g.protocol());
                }
                return out;
            }
            case "describe_group": {
                String group = r.get("group").asText();
                ConsumerGroupDescription g = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                    .get(T, TimeUnit.MILLISECONDS);
                ObjectNode out = CompatDriver.JSON.createObjectNode();
                out.put("state", g.groupState().toString());
                out.put("type", g.type().toString());
                out.put("assignor", g.partitionAssignor());
                out.put("simple", g.isSimpleConsumerGroup());
                out.put("members", g.members().size());
                ArrayNode sizes = out.putArray("assigned");
                g.members().stream().map(m -> m.assignment().topicPartitions().size()).sorted().forEach(sizes::add);
                return out;
            }
            case "delete_group":
                admin.deleteConsumerGroups(List.of(r.get("group").asText())).all().get(T, TimeUnit.MILLISECONDS);
                return NullNode.instance;
            case "group_offsets": {
                String group = r.get("group").asText(), topic = r.get("topic").asText();
                List<TopicPartition> tps = new ArrayList<>();
                for (JsonNode n : r.get("partitions")) tps.add(new TopicPartition(topic, n.asInt()));
                Map<TopicPartition, OffsetAndMetadata> got = admin.listConsumerGroupOffsets(Map.of(group,
                    new ListConsumerGroupOffsetsSpec().topicPartitions(tps))).partitionsToOffsetAndMetadata(group)
                    .get(T, TimeUnit.MILLISECONDS);
                ObjectNode out = CompatDriver.JSON.createObjectNode();
                for (TopicPartition tp : tps) {
                    OffsetAndMetadata o = got.get(tp);
                    if (o == null) out.putNull(String.valueOf(tp.partition()));
                    else out.putArray(String.valueOf(tp.partition())).add(o.offset()).add(o.metadata());
                }
                return out;
            }
            case "alter_group_offsets": {
                String group = r.get("group").asText(), topic = r.get("topic").asText();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                r.get("offsets").properties().forEach(f -> offsets.put(new TopicPartition(topic,
                    Integer.parseInt(f.getKey())), new OffsetAndMetadata(f.getValue().asLong())));
                admin.alterConsumerGroupOffsets(group, offsets).all().get(T, TimeUnit.MILLISECONDS);
                return NullNode.instance;
            }
            case "delete_group_offsets": {
                String group = r.get("group").asText(), topic = r.get("topic").asText();
                Set<TopicPartition> tps = new TreeSet<>(Comparator.comparingInt(TopicPartition::partition));
                for (JsonNode n : r.get("partitions")) tps.add(new TopicPartition(topic, n.asInt()));
                DeleteConsumerGroupOffsetsResult res = admin.deleteConsumerGroupOffsets(group, tps);
                ObjectNode out = CompatDriver.JSON.createObjectNode();
                for (TopicPartition tp : tps) {
                    try {
                        res.partitionResult(tp).get(T, TimeUnit.MILLISECONDS);
                        out.putNull(String.valueOf(tp.partition()));
                    } catch (java.util.concurrent.ExecutionException e) {
                        out.set(String.valueOf(tp.partition()), CompatDriver.error(e.getCause()));
                    }
                }
                return out;
            }
            case "acls": return acls(admin);
            case "authorized_operations": return authorizedOperations(admin, r.get("topic").asText());
            default: throw new IllegalArgumentException("unknown op " + op);
        }
    }

    /** List every ACL, add one (User:alice may read topic acl-topic), remove every ACL: each
     *  step's count or error (SECURITY_DISABLED without an authorizer). */
    static JsonNode acls(Admin admin) {
        AclBinding binding = new AclBinding(
            new org.apache.kafka.common.resource.ResourcePattern(org.apache.kafka.common.resource.ResourceType.TOPIC,
                "acl-topic", org.apache.kafka.common.resource.PatternType.LITERAL),
            new org.apache.kafka.common.acl.AccessControlEntry("User:alice", "*",
                org.apache.kafka.common.acl.AclOperation.READ, org.apache.kafka.common.acl.AclPermissionType.ALLOW));
        ObjectNode out = CompatDriver.JSON.createObjectNode();
        try {
            out.put("describe", admin.describeAcls(AclBindingFilter.ANY).values().get(T, TimeUnit.MILLISECONDS).size());
        } catch (Exception e) {
            out.set("describe", CompatDriver.error(e));
        }
        try {
            admin.createAcls(List.of(binding)).all().get(T, TimeUnit.MILLISECONDS);
            out.putNull("create");
        } catch (Exception e) {
            out.set("create", CompatDriver.error(e));
        }
        try {
            out.put("delete", admin.deleteAcls(List.of(AclBindingFilter.ANY)).all().get(T, TimeUnit.MILLISECONDS).size());
        } catch (Exception e) {
            out.set("delete", CompatDriver.error(e));
        }
        return out;
    }

    /** The cluster's and a topic's authorized operations, asked for (sorted names). */
    static JsonNode authorizedOperations(Admin admin, String topic) throws Exception {
        ObjectNode out = CompatDriver.JSON.createObjectNode();
        Set<org.apache.kafka.common.acl.AclOperation> cluster = admin.describeCluster(
            new DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations()
            .get(T, TimeUnit.MILLISECONDS);
        TopicDescription described = admin.describeTopics(List.of(topic),
            new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames()
            .get(T, TimeUnit.MILLISECONDS).get(topic);
        ArrayNode c = out.putArray("cluster");
        new TreeSet<>(cluster.stream().map(Enum::name).toList()).forEach(c::add);
        ArrayNode t = out.putArray("topic");
        new TreeSet<>(described.authorizedOperations().stream().map(Enum::name).toList()).forEach(t::add);
        return out;
    }

    static JsonNode createTopic(Admin admin, JsonNode r) throws Exception {
        NewTopic topic = new NewTopic(r.get("name").asText(), Optional.of(r.get("partitions").asInt()),
            Optional.of((short) r.get("rf").asInt()));
        Map<String, String> configs = new HashMap<>();
        r.get("configs").properties().forEach(f -> configs.put(f.getKey(), f.getValue().asText()));
        topic.configs(configs);
        admin.createTopics(List.of(topic), new CreateTopicsOptions().validateOnly(r.path("validate_only").asBoolean(false)))
            .all().get(T, TimeUnit.MILLISECONDS);
        return NullNode.instance;
    }

    static JsonNode describeTopic(Admin admin, String name) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(name)).allTopicNames().get(T, TimeUnit.MILLISECONDS).get(name);
        ObjectNode o = CompatDriver.JSON.createObjectNode();
        o.put("internal", d.isInternal());
        ArrayNode parts = o.putArray("partitions");
        for (TopicPartitionInfo p : d.partitions()) {
            ObjectNode po = parts.addObject();
            po.put("partition", p.partition());
            po.put("leader", p.leader() == null ? -1 : p.leader().id());
            ArrayNode replicas = po.putArray("replicas");
            p.replicas().forEach(n -> replicas.add(n.id()));
            ArrayNode isr = po.putArray("isr");
            p.isr().forEach(n -> isr.add(n.id()));
        }
        return o;
    }

    static JsonNode describeCluster(Admin admin) throws Exception {
        DescribeClusterResult c = admin.describeCluster();
        ObjectNode o = CompatDriver.JSON.createObjectNode();
        o.put("cluster_id", c.clusterId().get(T, TimeUnit.MILLISECONDS));
        o.put("controller", c.controller().get(T, TimeUnit.MILLISECONDS).id());
        ArrayNode nodes = o.putArray("nodes");
        for (Node n : c.nodes().get(T, TimeUnit.MILLISECONDS)) nodes.addArray().add(n.id()).add(n.host()).add(n.port());
        return o;
    }

    static JsonNode describeConfigs(Admin admin, JsonNode r) throws Exception {
        ConfigResource.Type type = r.get("type").asText().equals("broker") ? ConfigResource.Type.BROKER
            : ConfigResource.Type.TOPIC;
        ConfigResource res = new ConfigResource(type, r.get("name").asText());
        Config config = admin.describeConfigs(List.of(res),
                new DescribeConfigsOptions().includeSynonyms(r.path("synonyms").asBoolean(false)))
            .all().get(T, TimeUnit.MILLISECONDS).get(res);
        Set<String> keys = new HashSet<>();
        if (r.hasNonNull("keys")) r.get("keys").forEach(k -> keys.add(k.asText()));
        ObjectNode o = CompatDriver.JSON.createObjectNode();
        TreeMap<String, ConfigEntry> sorted = new TreeMap<>();
        for (ConfigEntry e : config.entries()) sorted.put(e.name(), e);
        for (ConfigEntry e : sorted.values()) {
            if (!keys.isEmpty() && !keys.contains(e.name())) continue;
            ObjectNode eo = o.putObject(e.name());
            eo.put("value", e.value());
            eo.put("source", e.source().name());
            eo.put("read_only", e.isReadOnly());
            eo.put("sensitive", e.isSensitive());
            eo.put("type", e.type().name());
            if (r.path("synonyms").asBoolean(false)) {
                ArrayNode syn = eo.putArray("synonyms");
                for (ConfigEntry.ConfigSynonym s : e.synonyms())
                    syn.addArray().add(s.name()).add(s.value()).add(s.source().name());
            }
        }
        return o;
    }

    static JsonNode alterConfigs(Admin admin, JsonNode r) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, r.get("topic").asText());
        List<AlterConfigOp> ops = new ArrayList<>();
        for (JsonNode o : r.get("ops")) {
            AlterConfigOp.OpType t = AlterConfigOp.OpType.valueOf(o.get(1).asText().toUpperCase(Locale.ROOT));
            ops.add(new AlterConfigOp(new ConfigEntry(o.get(0).asText(), o.get(2).isNull() ? null : o.get(2).asText()), t));
        }
        admin.incrementalAlterConfigs(Map.of(res, ops)).all().get(T, TimeUnit.MILLISECONDS);
        return NullNode.instance;
    }

    static JsonNode listOffsets(Admin admin, JsonNode r) throws Exception {
        TopicPartition tp = new TopicPartition(r.get("topic").asText(), r.get("partition").asInt());
        JsonNode spec = r.get("spec");
        OffsetSpec s;
        if (spec.isNumber()) s = OffsetSpec.forTimestamp(spec.asLong());
        else if (spec.asText().equals("earliest")) s = OffsetSpec.earliest();
        else if (spec.asText().equals("latest")) s = OffsetSpec.latest();
        else if (spec.asText().equals("max_timestamp")) s = OffsetSpec.maxTimestamp();
        else throw new IllegalArgumentException("spec " + spec);
        ListOffsetsOptions options = new ListOffsetsOptions(r.path("isolation").asText("").equals("read_committed")
            ? org.apache.kafka.common.IsolationLevel.READ_COMMITTED : org.apache.kafka.common.IsolationLevel.READ_UNCOMMITTED);
        ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, s), options)
            .partitionResult(tp).get(T, TimeUnit.MILLISECONDS);
        ObjectNode o = CompatDriver.JSON.createObjectNode();
        o.put("offset", info.offset());
        o.put("timestamp", info.timestamp());
        return o;
    }
}
