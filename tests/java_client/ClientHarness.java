// The Java client (kafka-clients) and Kafka Streams driven by the tests: one JVM per test
// module, run over the jars bench/apache_kafka.py caches (jvm/pom.xml). It reads one JSON
// command per line on stdin and answers each with one JSON line on stdout:
//   {"id": 7, "op": "produce", ...}  ->  {"id": 7, "ok": true, "result": ...}
//                                     or {"id": 7, "ok": false, "error": {"type": ..., "message": ...}}
// An error is the client's own exception (the cause of an ExecutionException), named by its
// class, so a test asserts the error Kafka's client raised. The harness asserts nothing: it
// does what it is told and reports what came back; the Python tests assert.
//
// Group members and Streams applications run on threads of their own (a KafkaConsumer is
// not thread-safe: its thread alone touches it and publishes what it saw), so a test can
// start a second member while the first is polling, and watch the rebalance.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

public class ClientHarness {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Map<String, GroupMember> MEMBERS = new ConcurrentHashMap<>();
    // Share consumers holding records they have not acknowledged (share_hold), by name.
    static final Map<String, KafkaShareConsumer<String, String>> HOLDERS = new ConcurrentHashMap<>();
    static final Map<String, KafkaStreams> APPS = new ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        // stdout carries the answers alone: anything a library prints goes to stderr.
        PrintStream answers = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        answers.println("{\"ready\": true}");
        String line;
        while ((line = commands.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode command = JSON.readTree(line);
            ObjectNode answer = JSON.createObjectNode();
            answer.set("id", command.get("id"));
            try {
                answer.set("result", run(command));
                answer.put("ok", true);
            } catch (Throwable failure) {
                answer.put("ok", false);
                answer.set("error", error(failure));
            }
            answers.println(JSON.writeValueAsString(answer));
        }
        for (GroupMember member : MEMBERS.values()) {
            member.stop();
        }
        for (KafkaStreams app : APPS.values()) {
            app.close(Duration.ofSeconds(10));
        }
    }

    static JsonNode run(JsonNode command) throws Exception {
        String op = command.get("op").asText();
        switch (op) {
            case "produce": return produce(command);
            case "produce_transactions": return produceTransactions(command);
            case "consume": return consume(command);
            case "share_consume": return shareConsume(command);
            case "share_hold": return shareHold(command);
            case "share_hold_close": return shareHoldClose(command);
            case "read_to_end": return readToEnd(command);
            case "offsets": return offsets(command);
            case "member_start": return memberStart(command);
            case "member_state": return member(command).state(false);
            case "member_stop": return memberStop(command);
            case "admin": return admin(command);
            case "streams_start": return streamsStart(command);
            case "streams_state": return streamsState(command);
            case "streams_stop": return streamsStop(command);
            default: throw new IllegalArgumentException("unknown op " + op);
        }
    }

    // --- producers -------------------------------------------------------------------

    static Properties properties(JsonNode command) {
        Properties properties = new Properties();
        for (Map.Entry<String, JsonNode> field : command.get("config").properties()) {
            properties.put(field.getKey(), field.getValue().asText());
        }
        return properties;
    }

    static KafkaProducer<String, String> producer(JsonNode command) {
        return new KafkaProducer<>(properties(command), new StringSerializer(), new StringSerializer());
    }

    static ProducerRecord<String, String> record(String topic, JsonNode spec) {
        Integer partition = spec.hasNonNull("partition") ? spec.get("partition").asInt() : null;
        Long timestamp = spec.hasNonNull("timestamp") ? spec.get("timestamp").asLong() : null;
        String key = spec.hasNonNull("key") ? spec.get("key").asText() : null;
        String value = spec.hasNonNull("value") ? spec.get("value").asText() : null;
        ProducerRecord<String, String> record = new ProducerRecord<>(topic, partition, timestamp, key, value);
        if (spec.has("headers")) {
            spec.get("headers").properties().forEach(header ->
                record.headers().add(header.getKey(), header.getValue().asText().getBytes(StandardCharsets.UTF_8)));
        }
        return record;
    }

    /** Sends every record, then answers each one's partition and offset, in order. */
    static JsonNode produce(JsonNode command) throws Exception {
        String topic = command.get("topic").asText();
        try (KafkaProducer<String, String> producer = producer(command)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (JsonNode spec : command.get("records")) {
                sent.add(producer.send(record(topic, spec)));
            }
            producer.flush();
            return written(sent);
        }
    }

    static ArrayNode written(List<Future<RecordMetadata>> sent) throws Exception {
        ArrayNode offsets = JSON.createArrayNode();
        for (Future<RecordMetadata> future : sent) {
            RecordMetadata metadata = future.get();
            offsets.add(JSON.createArrayNode().add(metadata.partition()).add(metadata.offset()));
        }
        return offsets;
    }

    /** One transactional producer: initTransactions, then each transaction in turn, its
     * records sent and the transaction committed or aborted as the command says. */
    static JsonNode produceTransactions(JsonNode command) throws Exception {
        String topic = command.get("topic").asText();
        ArrayNode results = JSON.createArrayNode();
        try (KafkaProducer<String, String> producer = producer(command)) {
            producer.initTransactions();
            for (JsonNode transaction : command.get("transactions")) {
                producer.beginTransaction();
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (JsonNode spec : transaction.get("records")) {
                    sent.add(producer.send(record(topic, spec)));
                }
                producer.flush();
                ArrayNode offsets = written(sent);
                if (transaction.get("commit").asBoolean()) {
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                results.add(offsets);
            }
        }
        return results;
    }

    // --- consumers -------------------------------------------------------------------

    /** A consumer of strings unless the config names other deserializers (a Streams
     * application's counts are longs). */
    static KafkaConsumer<Object, Object> consumer(Properties properties) {
        properties.putIfAbsent(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        properties.putIfAbsent(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(properties);
    }

    static ObjectNode json(ConsumerRecord<Object, Object> record) {
        ObjectNode node = JSON.createObjectNode();
        node.put("topic", record.topic());
        node.put("partition", record.partition());
        node.put("offset", record.offset());
        node.put("timestamp", record.timestamp());
        node.put("key", record.key() == null ? null : String.valueOf(record.key()));
        node.put("value", record.value() == null ? null : String.valueOf(record.value()));
        ObjectNode headers = node.putObject("headers");
        for (Header header : record.headers()) {
            headers.put(header.key(), new String(header.value(), StandardCharsets.UTF_8));
        }
        return node;
    }

    /** Reads until `count` records came or `timeout_ms` passed: by subscription when the
     * config names a group (committing what it read when told to), else from the start of
     * every partition of the topic. */
    static JsonNode consume(JsonNode command) throws Exception {
        Properties properties = properties(command);
        String topic = command.get("topic").asText();
        int count = command.get("count").asInt();
        long deadline = System.currentTimeMillis() + command.path("timeout_ms").asLong(30000);
        ArrayNode records = JSON.createArrayNode();
        try (KafkaConsumer<Object, Object> consumer = consumer(properties)) {
            if (properties.containsKey(ConsumerConfig.GROUP_ID_CONFIG)) {
                consumer.subscribe(List.of(topic));
            } else {
                List<TopicPartition> partitions = new ArrayList<>();
                consumer.partitionsFor(topic).forEach(info -> partitions.add(new TopicPartition(topic, info.partition())));
                consumer.assign(partitions);
                consumer.seekToBeginning(partitions);
            }
            while (records.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<Object, Object> record : consumer.poll(Duration.ofMillis(200))) {
                    records.add(json(record));
                }
            }
            if (command.path("commit").asBoolean(false)) {
                consumer.commitSync();
            }
        }
        return records;
    }

    /** A share-group member (KafkaShareConsumer, KIP-932) reading `topic` until `count`
     * records came or `timeout_ms` passed. In explicit acknowledgement mode each record
     * is acknowledged as `acks` says for its value (ACCEPT, RELEASE or REJECT; ACCEPT when
     * the value is not there) and committed after each poll; in implicit mode the next
     * poll accepts what the previous one returned. Each record with its delivery count. */
    static JsonNode shareConsume(JsonNode command) throws Exception {
        Properties properties = properties(command);
        String topic = command.get("topic").asText();
        int count = command.get("count").asInt();
        long deadline = System.currentTimeMillis() + command.path("timeout_ms").asLong(30000);
        JsonNode acks = command.path("acks");
        // Stop once nothing came for this long after something did (0: wait for `count`).
        long idleMs = command.path("idle_ms").asLong(0);
        boolean explicit = "explicit".equals(properties.getProperty("share.acknowledgement.mode"));
        ArrayNode records = JSON.createArrayNode();
        try (KafkaShareConsumer<String, String> consumer =
                 new KafkaShareConsumer<>(properties, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            long lastRecord = 0;
            while (records.size() < count && System.currentTimeMillis() < deadline) {
                if (idleMs > 0 && lastRecord > 0 && System.currentTimeMillis() - lastRecord > idleMs) {
                    break;
                }
                ConsumerRecords<String, String> polled = consumer.poll(Duration.ofMillis(200));
                if (!polled.isEmpty()) {
                    lastRecord = System.currentTimeMillis();
                }
                for (ConsumerRecord<String, String> record : polled) {
                    ObjectNode node = JSON.createObjectNode();
                    node.put("partition", record.partition());
                    node.put("offset", record.offset());
                    node.put("value", record.value());
                    node.put("delivery_count", record.deliveryCount().map(Short::intValue).orElse(-1));
                    records.add(node);
                    if (explicit) {
                        String kind = acks.path(String.valueOf(record.value())).asText("ACCEPT");
                        consumer.acknowledge(record, AcknowledgeType.valueOf(kind));
                    }
                }
                if (explicit && !polled.isEmpty()) {
                    consumer.commitSync();
                }
            }
            if (!explicit) {
                consumer.commitSync();
            }
        }
        return records;
    }

    /** A share consumer (explicit acknowledgement) that polls until it holds `count`
     * records, then neither acknowledges them nor polls again: it holds them until their
     * locks run out, its JVM dies or share_hold_close. Kept under `name`. */
    static JsonNode shareHold(JsonNode command) throws Exception {
        Properties properties = properties(command);
        properties.put("share.acknowledgement.mode", "explicit");
        int count = command.get("count").asInt();
        long deadline = System.currentTimeMillis() + command.path("timeout_ms").asLong(30000);
        KafkaShareConsumer<String, String> consumer =
            new KafkaShareConsumer<>(properties, new StringDeserializer(), new StringDeserializer());
        HOLDERS.put(command.get("name").asText(), consumer);
        consumer.subscribe(List.of(command.get("topic").asText()));
        ArrayNode records = JSON.createArrayNode();
        while (records.size() < count && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                ObjectNode node = JSON.createObjectNode();
                node.put("offset", record.offset());
                node.put("value", record.value());
                node.put("delivery_count", record.deliveryCount().map(Short::intValue).orElse(-1));
                records.add(node);
            }
        }
        return records;
    }

    static JsonNode shareHoldClose(JsonNode command) {
        KafkaShareConsumer<String, String> consumer = HOLDERS.remove(command.get("name").asText());
        if (consumer != null) {
            consumer.close();
        }
        return JSON.nullNode();
    }

    /** Every record of every partition of the topic, from the start to the end offsets
     * the consumer's isolation level sees (the last stable offset for read_committed),
     * asked once the read begins. */
    static JsonNode readToEnd(JsonNode command) throws Exception {
        Properties properties = properties(command);
        String topic = command.get("topic").asText();
        long deadline = System.currentTimeMillis() + command.path("timeout_ms").asLong(60000);
        ArrayNode records = JSON.createArrayNode();
        try (KafkaConsumer<Object, Object> consumer = consumer(properties)) {
            List<TopicPartition> partitions = new ArrayList<>();
            consumer.partitionsFor(topic).forEach(info -> partitions.add(new TopicPartition(topic, info.partition())));
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            while (partitions.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
                if (System.currentTimeMillis() > deadline) {
                    throw new java.util.concurrent.TimeoutException("read " + records.size() + " records, short of " + ends);
                }
                for (ConsumerRecord<Object, Object> record : consumer.poll(Duration.ofMillis(200))) {
                    records.add(json(record));
                }
            }
        }
        return records;
    }

    /** A partition's offsets as the consumer's ListOffsets calls give them: the first, the
     * end (for the config's isolation level), and the first at or after each timestamp
     * (null past the last record). */
    static JsonNode offsets(JsonNode command) {
        TopicPartition partition = new TopicPartition(command.get("topic").asText(), command.get("partition").asInt());
        ObjectNode result = JSON.createObjectNode();
        try (KafkaConsumer<Object, Object> consumer = consumer(properties(command))) {
            result.put("beginning", consumer.beginningOffsets(List.of(partition)).get(partition));
            result.put("end", consumer.endOffsets(List.of(partition)).get(partition));
            ArrayNode found = result.putArray("for_times");
            for (JsonNode timestamp : command.get("timestamps")) {
                var offset = consumer.offsetsForTimes(Map.of(partition, timestamp.asLong())).get(partition);
                if (offset == null) {
                    found.addNull();
                } else {
                    found.add(JSON.createArrayNode().add(offset.offset()).add(offset.timestamp()));
                }
            }
        }
        return result;
    }

    /** A member of a consumer group on its own thread: it polls until stopped, commits
     * after each poll, and records the assignments its rebalance listener is given. */
    static final class GroupMember implements Runnable, ConsumerRebalanceListener {
        final KafkaConsumer<Object, Object> consumer;
        final String topic;
        final Thread thread;
        final List<ObjectNode> records = new ArrayList<>();
        final List<List<String>> assignments = new ArrayList<>();
        List<String> assigned = new ArrayList<>();
        int generation = -1;
        String failure;
        volatile boolean stopping;

        GroupMember(String name, Properties properties, String topic) {
            this.consumer = consumer(properties);
            this.topic = topic;
            this.thread = new Thread(this, "member-" + name);
        }

        @Override
        public void run() {
            try {
                if (topic.startsWith("pattern:")) {
                    // KIP-848's broker-side regex (RE2), with group.protocol=consumer.
                    consumer.subscribe(new SubscriptionPattern(topic.substring("pattern:".length())), this);
                } else {
                    consumer.subscribe(List.of(topic), this);
                }
                while (!stopping) {
                    ConsumerRecords<Object, Object> polled = consumer.poll(Duration.ofMillis(100));
                    synchronized (this) {
                        for (ConsumerRecord<Object, Object> record : polled) {
                            records.add(json(record));
                        }
                        generation = consumer.groupMetadata().generationId();
                    }
                    if (!polled.isEmpty()) {
                        consumer.commitSync();
                    }
                }
            } catch (WakeupException stopped) {
                // stop() woke the poll
            } catch (Throwable error) {
                synchronized (this) {
                    failure = error.getClass().getName() + ": " + error.getMessage();
                }
            } finally {
                consumer.close(CloseOptions.timeout(Duration.ofSeconds(10)));
            }
        }

        @Override
        public synchronized void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            assigned = names(consumer.assignment());
            assignments.add(assigned);
        }

        @Override
        public synchronized void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            // Committing here keeps a partition's reads from being read again by its next owner.
            consumer.commitSync();
        }

        @Override
        public synchronized void onPartitionsLost(Collection<TopicPartition> partitions) {
            assigned = new ArrayList<>();
        }

        static List<String> names(Collection<TopicPartition> partitions) {
            List<String> names = new ArrayList<>();
            partitions.forEach(tp -> names.add(tp.topic() + ":" + tp.partition()));
            names.sort(null);
            return names;
        }

        synchronized ObjectNode state(boolean withRecords) {
            ObjectNode state = JSON.createObjectNode();
            state.set("assigned", JSON.valueToTree(assigned));
            state.set("assignments", JSON.valueToTree(assignments));
            state.put("generation", generation);
            state.put("count", records.size());
            state.put("failure", failure);
            if (withRecords) {
                state.set("records", JSON.valueToTree(records));
            }
            return state;
        }

        void stop() throws InterruptedException {
            stopping = true;
            thread.join(30000);
        }
    }

    static GroupMember member(JsonNode command) {
        GroupMember member = MEMBERS.get(command.get("name").asText());
        if (member == null) {
            throw new IllegalArgumentException("no member " + command.get("name").asText());
        }
        return member;
    }

    static JsonNode memberStart(JsonNode command) {
        String name = command.get("name").asText();
        GroupMember member = new GroupMember(name, properties(command), command.get("topic").asText());
        MEMBERS.put(name, member);
        member.thread.start();
        return member.state(false);
    }

    static JsonNode memberStop(JsonNode command) throws InterruptedException {
        GroupMember member = member(command);
        member.stop();
        MEMBERS.remove(command.get("name").asText());
        return member.state(true);
    }

    // --- the admin client ------------------------------------------------------------

    static JsonNode admin(JsonNode command) throws Exception {
        try (Admin admin = Admin.create(properties(command))) {
            String action = command.get("action").asText();
            switch (action) {
                case "create_topics": return createTopics(admin, command);
                case "delete_topics": return outcomes(admin.deleteTopics(strings(command.get("names"))).topicNameValues());
                case "list_topics": return JSON.valueToTree(new TreeMap<>(admin.listTopics(new ListTopicsOptions().listInternal(true)).namesToListings().get()).keySet());
                case "describe_topics": return describeTopics(admin, command);
                case "create_partitions": return createPartitions(admin, command);
                case "describe_configs": return describeConfigs(admin, command);
                case "alter_configs": return alterConfigs(admin, command);
                case "create_acls": return createAcls(admin, command);
                case "describe_acls": return describeAcls(admin, command);
                case "delete_acls": return deleteAcls(admin, command);
                case "alter_reassignments": return alterReassignments(admin, command);
                case "list_reassignments": return listReassignments(admin);
                case "list_group_offsets": return listGroupOffsets(admin, command);
                case "alter_group_offsets": return alterGroupOffsets(admin, command);
                case "delete_group_offsets": return deleteGroupOffsets(admin, command);
                case "describe_groups": return describeGroups(admin, command);
                case "list_groups": return listGroups(admin);
                case "delete_groups": return outcomes(admin.deleteConsumerGroups(strings(command.get("groups"))).deletedGroups());
                case "describe_cluster": return describeCluster(admin);
                case "delete_records": return deleteRecords(admin, command);
                default: throw new IllegalArgumentException("unknown admin action " + action);
            }
        }
    }

    static List<String> strings(JsonNode array) {
        List<String> values = new ArrayList<>();
        array.forEach(value -> values.add(value.asText()));
        return values;
    }

    /** Each future's outcome: {"ok": null} or {"error": {...}}, by key. */
    static <K> ObjectNode outcomes(Map<K, ? extends KafkaFuture<?>> futures) throws InterruptedException {
        ObjectNode result = JSON.createObjectNode();
        for (Map.Entry<K, ? extends KafkaFuture<?>> entry : futures.entrySet()) {
            ObjectNode outcome = result.putObject(String.valueOf(entry.getKey()));
            try {
                entry.getValue().get();
                outcome.putNull("ok");
            } catch (ExecutionException failed) {
                outcome.set("error", error(failed));
            }
        }
        return result;
    }

    static JsonNode createTopics(Admin admin, JsonNode command) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        for (JsonNode spec : command.get("topics")) {
            NewTopic topic = new NewTopic(spec.get("name").asText(),
                Optional.ofNullable(spec.hasNonNull("partitions") ? spec.get("partitions").asInt() : null),
                Optional.ofNullable(spec.hasNonNull("replication_factor") ? (short) spec.get("replication_factor").asInt() : null));
            if (spec.has("configs")) {
                Map<String, String> configs = new HashMap<>();
                spec.get("configs").properties().forEach(c -> configs.put(c.getKey(), c.getValue().asText()));
                topic.configs(configs);
            }
            topics.add(topic);
        }
        return outcomes(admin.createTopics(topics).values());
    }

    static JsonNode createPartitions(Admin admin, JsonNode command) throws Exception {
        Map<String, org.apache.kafka.clients.admin.NewPartitions> counts = new HashMap<>();
        command.get("counts").properties().forEach(c ->
            counts.put(c.getKey(), org.apache.kafka.clients.admin.NewPartitions.increaseTo(c.getValue().asInt())));
        return outcomes(admin.createPartitions(counts).values());
    }

    static JsonNode describeTopics(Admin admin, JsonNode command) throws Exception {
        DescribeTopicsOptions options = new DescribeTopicsOptions().includeAuthorizedOperations(true);
        if (command.has("partition_limit")) {
            options.partitionSizeLimitPerResponse(command.get("partition_limit").asInt());
        }
        Map<String, KafkaFuture<TopicDescription>> futures =
            admin.describeTopics(TopicCollection.ofTopicNames(strings(command.get("names"))), options).topicNameValues();
        ObjectNode result = JSON.createObjectNode();
        for (Map.Entry<String, KafkaFuture<TopicDescription>> entry : futures.entrySet()) {
            ObjectNode topic = result.putObject(entry.getKey());
            try {
                TopicDescription description = entry.getValue().get();
                topic.put("id", description.topicId().toString());
                topic.put("internal", description.isInternal());
                ArrayNode partitions = topic.putArray("partitions");
                for (TopicPartitionInfo info : description.partitions()) {
                    ObjectNode partition = partitions.addObject();
                    partition.put("partition", info.partition());
                    partition.put("leader", info.leader() == null ? -1 : info.leader().id());
                    partition.set("replicas", ids(info.replicas()));
                    partition.set("isr", ids(info.isr()));
                }
                ArrayNode operations = topic.putArray("authorized_operations");
                if (description.authorizedOperations() != null) {
                    description.authorizedOperations().stream().map(AclOperation::name).sorted().forEach(operations::add);
                }
            } catch (ExecutionException failed) {
                topic.set("error", error(failed));
            }
        }
        return result;
    }

    static ArrayNode ids(List<Node> nodes) {
        ArrayNode ids = JSON.createArrayNode();
        nodes.forEach(node -> ids.add(node.id()));
        return ids;
    }

    static ConfigResource resource(JsonNode spec) {
        return new ConfigResource(ConfigResource.Type.valueOf(spec.get("type").asText()), spec.get("name").asText());
    }

    static JsonNode describeConfigs(Admin admin, JsonNode command) throws Exception {
        List<ConfigResource> resources = new ArrayList<>();
        command.get("resources").forEach(spec -> resources.add(resource(spec)));
        ObjectNode result = JSON.createObjectNode();
        for (Map.Entry<ConfigResource, KafkaFuture<Config>> entry : admin.describeConfigs(resources).values().entrySet()) {
            ObjectNode described = result.putObject(entry.getKey().name());
            try {
                for (ConfigEntry config : entry.getValue().get().entries()) {
                    ObjectNode value = described.putObject(config.name());
                    value.put("value", config.value());
                    value.put("source", config.source().name());
                    value.put("read_only", config.isReadOnly());
                    value.put("sensitive", config.isSensitive());
                }
            } catch (ExecutionException failed) {
                described.set("error", error(failed));
            }
        }
        return result;
    }

    static JsonNode alterConfigs(Admin admin, JsonNode command) throws Exception {
        Map<ConfigResource, Collection<AlterConfigOp>> changes = new HashMap<>();
        for (JsonNode spec : command.get("resources")) {
            List<AlterConfigOp> ops = new ArrayList<>();
            for (JsonNode op : spec.get("ops")) {
                ops.add(new AlterConfigOp(new ConfigEntry(op.get("key").asText(),
                    op.hasNonNull("value") ? op.get("value").asText() : null),
                    AlterConfigOp.OpType.valueOf(op.get("op").asText())));
            }
            changes.put(resource(spec), ops);
        }
        return outcomes(admin.incrementalAlterConfigs(changes).values());
    }

    static AclBinding binding(JsonNode spec) {
        return new AclBinding(
            new ResourcePattern(ResourceType.valueOf(spec.get("resource_type").asText()), spec.get("name").asText(),
                PatternType.valueOf(spec.path("pattern").asText("LITERAL"))),
            new AccessControlEntry(spec.get("principal").asText(), spec.path("host").asText("*"),
                AclOperation.valueOf(spec.get("operation").asText()),
                AclPermissionType.valueOf(spec.path("permission").asText("ALLOW"))));
    }

    static AclBindingFilter filter(JsonNode spec) {
        return new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.valueOf(spec.path("resource_type").asText("ANY")),
                spec.hasNonNull("name") ? spec.get("name").asText() : null,
                PatternType.valueOf(spec.path("pattern").asText("ANY"))),
            new AccessControlEntryFilter(spec.hasNonNull("principal") ? spec.get("principal").asText() : null, null,
                AclOperation.valueOf(spec.path("operation").asText("ANY")),
                AclPermissionType.valueOf(spec.path("permission").asText("ANY"))));
    }

    static ObjectNode json(AclBinding binding) {
        ObjectNode node = JSON.createObjectNode();
        node.put("resource_type", binding.pattern().resourceType().name());
        node.put("name", binding.pattern().name());
        node.put("pattern", binding.pattern().patternType().name());
        node.put("principal", binding.entry().principal());
        node.put("host", binding.entry().host());
        node.put("operation", binding.entry().operation().name());
        node.put("permission", binding.entry().permissionType().name());
        return node;
    }

    static JsonNode createAcls(Admin admin, JsonNode command) throws Exception {
        List<AclBinding> bindings = new ArrayList<>();
        command.get("bindings").forEach(spec -> bindings.add(binding(spec)));
        admin.createAcls(bindings).all().get();
        return JSON.nullNode();
    }

    static JsonNode describeAcls(Admin admin, JsonNode command) throws Exception {
        ArrayNode found = JSON.createArrayNode();
        admin.describeAcls(filter(command.get("filter"))).values().get().forEach(b -> found.add(json(b)));
        return found;
    }

    static JsonNode deleteAcls(Admin admin, JsonNode command) throws Exception {
        ArrayNode deleted = JSON.createArrayNode();
        admin.deleteAcls(List.of(filter(command.get("filter")))).all().get().forEach(b -> deleted.add(json(b)));
        return deleted;
    }

    static JsonNode alterReassignments(Admin admin, JsonNode command) throws Exception {
        Map<TopicPartition, Optional<NewPartitionReassignment>> moves = new HashMap<>();
        for (JsonNode move : command.get("moves")) {
            TopicPartition partition = new TopicPartition(move.get("topic").asText(), move.get("partition").asInt());
            if (move.hasNonNull("replicas")) {
                List<Integer> replicas = new ArrayList<>();
                move.get("replicas").forEach(r -> replicas.add(r.asInt()));
                moves.put(partition, Optional.of(new NewPartitionReassignment(replicas)));
            } else {
                moves.put(partition, Optional.empty());
            }
        }
        return outcomes(admin.alterPartitionReassignments(moves).values());
    }

    static JsonNode listReassignments(Admin admin) throws Exception {
        ObjectNode result = JSON.createObjectNode();
        for (Map.Entry<TopicPartition, PartitionReassignment> entry : admin.listPartitionReassignments().reassignments().get().entrySet()) {
            ObjectNode move = result.putObject(entry.getKey().topic() + ":" + entry.getKey().partition());
            move.set("replicas", JSON.valueToTree(entry.getValue().replicas()));
            move.set("adding", JSON.valueToTree(entry.getValue().addingReplicas()));
            move.set("removing", JSON.valueToTree(entry.getValue().removingReplicas()));
        }
        return result;
    }

    static JsonNode listGroupOffsets(Admin admin, JsonNode command) throws Exception {
        ObjectNode offsets = JSON.createObjectNode();
        Map<TopicPartition, OffsetAndMetadata> committed =
            admin.listConsumerGroupOffsets(command.get("group").asText()).partitionsToOffsetAndMetadata().get();
        committed.forEach((tp, offset) -> offsets.put(tp.topic() + ":" + tp.partition(), offset == null ? -1 : offset.offset()));
        return offsets;
    }

    static TopicPartition partition(JsonNode pair) {
        return new TopicPartition(pair.get(0).asText(), pair.get(1).asInt());
    }

    static JsonNode alterGroupOffsets(Admin admin, JsonNode command) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        command.get("offsets").forEach(entry -> offsets.put(partition(entry), new OffsetAndMetadata(entry.get(2).asLong())));
        return outcomes(Map.of("all", admin.alterConsumerGroupOffsets(command.get("group").asText(), offsets).all()));
    }

    static JsonNode deleteGroupOffsets(Admin admin, JsonNode command) throws Exception {
        java.util.Set<TopicPartition> partitions = new java.util.HashSet<>();
        command.get("partitions").forEach(entry -> partitions.add(partition(entry)));
        return outcomes(Map.of("all", admin.deleteConsumerGroupOffsets(command.get("group").asText(), partitions).all()));
    }

    static JsonNode describeGroups(Admin admin, JsonNode command) throws Exception {
        ObjectNode result = JSON.createObjectNode();
        Map<String, KafkaFuture<ConsumerGroupDescription>> futures = admin.describeConsumerGroups(
            strings(command.get("groups")), new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).describedGroups();
        for (Map.Entry<String, KafkaFuture<ConsumerGroupDescription>> entry : futures.entrySet()) {
            ObjectNode group = result.putObject(entry.getKey());
            try {
                ConsumerGroupDescription description = entry.getValue().get();
                group.put("state", description.groupState().name());
                group.put("type", description.type().name());
                group.put("assignor", description.partitionAssignor());
                group.put("coordinator", description.coordinator().id());
                // A consumer group's (KIP-848) epoch; absent for a classic group.
                description.groupEpoch().ifPresent(epoch -> group.put("epoch", epoch));
                ArrayNode members = group.putArray("members");
                for (MemberDescription member : description.members()) {
                    ObjectNode node = members.addObject();
                    node.put("client_id", member.clientId());
                    node.set("assignment", JSON.valueToTree(GroupMember.names(member.assignment().topicPartitions())));
                }
            } catch (ExecutionException failed) {
                group.set("error", error(failed));
            }
        }
        return result;
    }

    static JsonNode listGroups(Admin admin) throws Exception {
        ObjectNode result = JSON.createObjectNode();
        for (GroupListing listing : admin.listGroups(new ListGroupsOptions()).all().get()) {
            ObjectNode group = result.putObject(listing.groupId());
            group.put("type", listing.type().map(Enum::name).orElse(null));
            group.put("protocol", listing.protocol());
            group.put("state", listing.groupState().map(Enum::name).orElse(null));
        }
        return result;
    }

    /** DeleteRecords: the partition's records before `before` go; answers the new low
     * watermark. */
    static JsonNode deleteRecords(Admin admin, JsonNode command) throws Exception {
        TopicPartition partition = new TopicPartition(command.get("topic").asText(), command.get("partition").asInt());
        var deleted = admin.deleteRecords(Map.of(partition,
            org.apache.kafka.clients.admin.RecordsToDelete.beforeOffset(command.get("before").asLong())));
        return JSON.getNodeFactory().numberNode(deleted.lowWatermarks().get(partition).get().lowWatermark());
    }

    static JsonNode describeCluster(Admin admin) throws Exception {
        var cluster = admin.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true));
        ObjectNode result = JSON.createObjectNode();
        result.put("cluster_id", cluster.clusterId().get());
        result.put("controller", cluster.controller().get().id());
        ArrayNode nodes = result.putArray("nodes");
        List<Node> sorted = new ArrayList<>(cluster.nodes().get());
        sorted.sort((a, b) -> Integer.compare(a.id(), b.id()));
        for (Node node : sorted) {
            ObjectNode entry = nodes.addObject();
            entry.put("id", node.id());
            entry.put("host", node.host());
            entry.put("port", node.port());
            entry.put("rack", node.rack());
        }
        ArrayNode operations = result.putArray("authorized_operations");
        Set<AclOperation> allowed = cluster.authorizedOperations().get();
        if (allowed != null) {
            allowed.stream().map(AclOperation::name).sorted().forEach(operations::add);
        }
        return result;
    }

    // --- Kafka Streams ---------------------------------------------------------------

    /** A word count: lines in, each word's running count out (a repartition topic by
     * word, a changelogged store of counts), exactly once (v2) unless the config says
     * otherwise. */
    static JsonNode streamsStart(JsonNode command) {
        Properties properties = properties(command);
        properties.putIfAbsent(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(command.get("input").asText());
        lines.flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
            .toStream()
            .to(command.get("output").asText(), Produced.with(Serdes.String(), Serdes.Long()));
        properties.putIfAbsent(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        properties.putIfAbsent(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        KafkaStreams app = new KafkaStreams(builder.build(), properties);
        String name = command.get("name").asText();
        app.setUncaughtExceptionHandler(failure -> {
            failure.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        APPS.put(name, app);
        app.start();
        return JSON.createObjectNode().put("state", app.state().name());
    }

    static KafkaStreams app(JsonNode command) {
        KafkaStreams app = APPS.get(command.get("name").asText());
        if (app == null) {
            throw new IllegalArgumentException("no application " + command.get("name").asText());
        }
        return app;
    }

    static JsonNode streamsState(JsonNode command) {
        return JSON.createObjectNode().put("state", app(command).state().name());
    }

    static JsonNode streamsStop(JsonNode command) {
        KafkaStreams app = app(command);
        boolean closed = app.close(Duration.ofSeconds(30));
        APPS.remove(command.get("name").asText());
        return JSON.createObjectNode().put("closed", closed).put("state", app.state().name());
    }

    // --- errors ----------------------------------------------------------------------

    static ObjectNode error(Throwable failure) {
        Throwable cause = failure;
        while ((cause instanceof ExecutionException || cause instanceof java.util.concurrent.CompletionException)
                && cause.getCause() != null) {
            cause = cause.getCause();
        }
        ObjectNode error = JSON.createObjectNode();
        error.put("type", cause.getClass().getSimpleName());
        error.put("message", String.valueOf(cause.getMessage()));
        // What lies under it (a client that could not be made says why only there).
        StringBuilder under = new StringBuilder();
        for (Throwable inner = cause.getCause(); inner != null; inner = inner.getCause()) {
            under.append(" <- ").append(inner.getClass().getSimpleName()).append(": ").append(inner.getMessage());
        }
        error.put("causes", under.toString());
        return error;
    }
}
