/*
 * kaflite's reference harness for Kafka's assignors (tools/assign-harness/README.md).
 *
 * Reads group scenarios (JSON, written by gen_cases.py), runs them through Apache Kafka's own assignor
 * classes compiled from the user's Kafka checkout, and writes every rebalance round as JSON: what the
 * group leader's assignor received (in the order Java iterates it) and what it returned (list order
 * exactly as Kafka's assignor built it). Nothing of Kafka is copied here; this program only calls it.
 *
 * How a round is driven, as a Java consumer group does it:
 * - client assignors: every member has its own assignor instance; its Subscription carries the topics
 *   (ArrayList of a HashSet, as ConsumerCoordinator.metadata()), the instance's subscriptionUserData,
 *   the owned partitions (cooperative only: eager members revoke everything before joining; sorted by
 *   topic then partition, as ConsumerProtocol.serializeSubscription writes them), the member's generation
 *   (-1 before its first assignment) and rack. The leader's assignor (a fresh instance each round) gets a
 *   HashMap<String, Subscription> filled in join order and a Cluster with the replicas' racks, via
 *   assign(Cluster, GroupSubscription). Each member then receives its list regrouped by topic in
 *   first-seen order (ConsumerProtocol's assignment encoding) and its instance's onAssignment runs.
 *   Cooperative-sticky: while a round revokes something, another round follows (at most 4).
 * - server assignors (KIP-848 uniform, range): a GroupSpec over a HashMap of members in join order, each
 *   subscribed to a HashSet of topic ids and holding its previous target assignment (HashMap of
 *   HashSets); one round per scenario state.
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;

import java.io.File;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

public class AssignHarness {
    static final ObjectMapper JSON = new ObjectMapper();
    static final int MAX_COOPERATIVE_FOLLOW_UPS = 4;

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: AssignHarness <scenarios.json> <out.json>");
            System.exit(2);
        }
        JsonNode in = JSON.readTree(new File(args[0]));
        ObjectNode out = JSON.createObjectNode();
        out.set("meta", in.get("meta"));
        ArrayNode cases = out.putArray("cases");
        for (JsonNode scenario : in.get("scenarios")) {
            String kind = scenario.get("assignor").asText();
            ObjectNode c = cases.addObject();
            c.put("id", scenario.get("id").asText());
            c.put("assignor", kind);
            c.set("topics", scenario.get("topics"));
            if (scenario.hasNonNull("topic_ids")) c.set("topic_ids", scenario.get("topic_ids"));
            if (scenario.hasNonNull("partition_racks")) c.set("partition_racks", scenario.get("partition_racks"));
            ArrayNode rounds = c.putArray("rounds");
            if (kind.equals("uniform") || kind.equals("server-range"))
                runServer(scenario, rounds);
            else
                runClient(scenario, rounds);
        }
        JSON.writerWithDefaultPrettyPrinter().writeValue(new File(args[1]), out);
    }

    // ---- client-side assignors --------------------------------------------------------------------

    static ConsumerPartitionAssignor newClientAssignor(String kind) {
        switch (kind) {
            case "range": return new RangeAssignor();
            case "roundrobin": return new RoundRobinAssignor();
            case "sticky": return new StickyAssignor();
            case "cooperative-sticky": return new CooperativeStickyAssignor();
            default: throw new IllegalArgumentException("unknown assignor " + kind);
        }
    }

    static Cluster cluster(JsonNode scenario) {
        JsonNode racks = scenario.get("partition_racks");
        Map<String, Node> nodes = new LinkedHashMap<>();  // one broker per rack name (null: no rack)
        List<PartitionInfo> infos = new ArrayList<>();
        for (JsonNode t : scenario.get("topics")) {
            String topic = t.get(0).asText();
            int n = t.get(1).asInt();
            for (int p = 0; p < n; p++) {
                Node[] replicas = new Node[0];
                JsonNode rs = racks == null || racks.isNull() ? null : racks.get(topic + "-" + p);
                if (rs != null) {
                    replicas = new Node[rs.size()];
                    for (int i = 0; i < rs.size(); i++) {
                        String rack = rs.get(i).isNull() ? null : rs.get(i).asText();
                        String key = rack == null ? "<none>" + i : rack;
                        final int id = nodes.size();
                        replicas[i] = nodes.computeIfAbsent(key, k -> new Node(id, "broker" + id, 9092, rack));
                    }
                }
                Node leader = replicas.length > 0 ? replicas[0] : null;
                infos.add(new PartitionInfo(topic, p, leader, replicas, replicas));
            }
        }
        return new Cluster("harness", new ArrayList<>(nodes.values()), infos, Collections.emptySet(), Collections.emptySet());
    }

    static final class ClientMember {
        final ConsumerPartitionAssignor assignor;
        List<TopicPartition> received = new ArrayList<>();
        int generation = -1;
        ClientMember(ConsumerPartitionAssignor a) { assignor = a; }
    }

    static void runClient(JsonNode scenario, ArrayNode rounds) {
        String kind = scenario.get("assignor").asText();
        boolean cooperative = kind.equals("cooperative-sticky");
        Cluster cluster = cluster(scenario);
        Map<String, ClientMember> members = new HashMap<>();
        int generation = 0;
        int stateIndex = 0;
        for (JsonNode state : scenario.get("states")) {
            for (int attempt = 0; attempt <= (cooperative ? MAX_COOPERATIVE_FOLLOW_UPS : 0); attempt++) {
                generation++;
                ObjectNode round = rounds.addObject();
                round.put("state", stateIndex);
                round.put("generation", generation);
                ArrayNode subsOut = round.putArray("subscriptions");
                Map<String, Subscription> subscriptions = new HashMap<>();  // ConsumerCoordinator.onLeaderElected
                Map<String, JsonNode> memberSpecs = new LinkedHashMap<>();
                for (JsonNode m : state) {
                    String id = m.get("id").asText();
                    memberSpecs.put(id, m);
                    ClientMember cm = members.computeIfAbsent(id, k -> new ClientMember(newClientAssignor(kind)));
                    Set<String> topicSet = new HashSet<>();
                    for (JsonNode t : m.get("topics")) topicSet.add(t.asText());
                    List<String> topics = new ArrayList<>(topicSet);
                    ByteBuffer userData = cm.assignor.subscriptionUserData(topicSet);
                    List<TopicPartition> owned = new ArrayList<>();
                    if (cooperative) {
                        owned.addAll(cm.received);
                        owned.sort((a, b) -> a.topic().equals(b.topic()) ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()));
                    }
                    Optional<String> instance = optText(m, "instance_id");
                    Optional<String> rack = optText(m, "rack");
                    Subscription sub = new Subscription(topics, userData, owned, cm.generation, rack);
                    sub.setGroupInstanceId(instance);
                    subscriptions.put(id, sub);
                    ObjectNode so = subsOut.addObject();
                    so.put("id", id);
                    ArrayNode ts = so.putArray("topics");
                    topics.forEach(ts::add);
                    if (instance.isPresent()) so.put("instance_id", instance.get()); else so.putNull("instance_id");
                    if (rack.isPresent()) so.put("rack", rack.get()); else so.putNull("rack");
                    ArrayNode ow = so.putArray("owned_partitions");
                    owned.forEach(tp -> ow.add(tp.toString()));
                    so.put("generation_id", cm.generation);
                    if (userData == null) so.putNull("user_data_hex"); else so.put("user_data_hex", hex(userData));
                }
                ArrayNode order = round.putArray("java_member_order");
                subscriptions.keySet().forEach(order::add);
                ConsumerPartitionAssignor leader = newClientAssignor(kind);
                Map<String, Assignment> result;
                try {
                    result = leader.assign(cluster, new GroupSubscription(subscriptions)).groupAssignment();
                } catch (RuntimeException e) {
                    round.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
                    return;
                }
                ObjectNode asg = round.putObject("assignment");
                boolean revoked = false;
                for (String id : memberSpecs.keySet()) {
                    Assignment a = result.get(id);
                    List<TopicPartition> list = a == null ? Collections.emptyList() : a.partitions();
                    ArrayNode arr = asg.putArray(id);
                    list.forEach(tp -> arr.add(tp.toString()));
                    ClientMember cm = members.get(id);
                    if (!new HashSet<>(list).containsAll(cm.received)) revoked = true;
                    cm.received = regroupByTopic(list);
                    cm.generation = generation;
                    JsonNode m = memberSpecs.get(id);
                    cm.assignor.onAssignment(new Assignment(cm.received),
                        new ConsumerGroupMetadata("harness", generation, id, optText(m, "instance_id")));
                }
                if (!cooperative || !revoked) break;
            }
            // members that left forget their state (a member id is never reused by the generator)
            Set<String> present = new HashSet<>();
            for (JsonNode m : state) present.add(m.get("id").asText());
            members.keySet().retainAll(present);
            stateIndex++;
        }
    }

    /** ConsumerProtocol's assignment encoding: partitions grouped by topic, topics in first-seen order. */
    static List<TopicPartition> regroupByTopic(List<TopicPartition> list) {
        Map<String, List<TopicPartition>> byTopic = new LinkedHashMap<>();
        for (TopicPartition tp : list) byTopic.computeIfAbsent(tp.topic(), k -> new ArrayList<>()).add(tp);
        List<TopicPartition> out = new ArrayList<>();
        byTopic.values().forEach(out::addAll);
        return out;
    }

    // ---- server-side assignors (KIP-848) -----------------------------------------------------------

    static ConsumerGroupPartitionAssignor newServerAssignor(String kind) {
        return kind.equals("uniform")
            ? new org.apache.kafka.coordinator.group.assignor.UniformAssignor()
            : new org.apache.kafka.coordinator.group.assignor.RangeAssignor();
    }

    static final class Member implements MemberSubscription, MemberAssignment {
        final Optional<String> rack, instance;
        final Set<Uuid> topics;
        final Map<Uuid, Set<Integer>> partitions;
        Member(Optional<String> rack, Optional<String> instance, Set<Uuid> topics, Map<Uuid, Set<Integer>> partitions) {
            this.rack = rack; this.instance = instance; this.topics = topics; this.partitions = partitions;
        }
        public Optional<String> rackId() { return rack; }
        public Optional<String> instanceId() { return instance; }
        public Set<Uuid> subscribedTopicIds() { return topics; }
        public Map<Uuid, Set<Integer>> partitions() { return partitions; }
    }

    static void runServer(JsonNode scenario, ArrayNode rounds) {
        String kind = scenario.get("assignor").asText();
        Map<String, Uuid> ids = new HashMap<>();
        Map<Uuid, String> names = new HashMap<>();
        Map<Uuid, Integer> counts = new HashMap<>();
        for (JsonNode t : scenario.get("topics")) {
            String name = t.get(0).asText();
            Uuid id = Uuid.fromString(scenario.get("topic_ids").get(name).asText());
            ids.put(name, id);
            names.put(id, name);
            counts.put(id, t.get(1).asInt());
        }
        SubscribedTopicDescriber describer = new SubscribedTopicDescriber() {
            public int numPartitions(Uuid topicId) { return counts.getOrDefault(topicId, -1); }
            public Set<String> racksForPartition(Uuid topicId, int partition) { return Collections.emptySet(); }
        };
        Map<String, Map<Uuid, Set<Integer>>> target = new HashMap<>();
        int stateIndex = 0;
        for (JsonNode state : scenario.get("states")) {
            ObjectNode round = rounds.addObject();
            round.put("state", stateIndex++);
            ArrayNode subsOut = round.putArray("members");
            Map<String, Member> members = new HashMap<>();  // TargetAssignmentBuilder's memberSpecs
            Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
            Set<Set<Uuid>> distinct = new HashSet<>();
            for (JsonNode m : state) {
                String id = m.get("id").asText();
                Set<Uuid> topics = new HashSet<>();
                for (JsonNode t : m.get("topics")) topics.add(ids.get(t.asText()));
                distinct.add(topics);
                // immutable, as the coordinator hands it over (Kafka's Assignment wraps it so)
                Map<Uuid, Set<Integer>> current = Collections.unmodifiableMap(target.getOrDefault(id, new HashMap<>()));
                current.forEach((t, ps) -> ps.forEach(p -> inverted.computeIfAbsent(t, k -> new HashMap<>()).put(p, id)));
                members.put(id, new Member(optText(m, "rack"), optText(m, "instance_id"), topics, current));
                ObjectNode so = subsOut.addObject();
                so.put("id", id);
                ArrayNode ts = so.putArray("topics");
                m.get("topics").forEach(ts::add);
                so.set("instance_id", m.get("instance_id"));
                so.set("rack", m.get("rack"));
                // the previous target assignment as Java iterates it: topics (HashMap<Uuid>), partitions (HashSet<Integer>)
                ArrayNode cur = so.putArray("current_assignment");
                current.forEach((t, ps) -> ps.forEach(p -> cur.add(names.get(t) + "-" + p)));
            }
            ArrayNode order = round.putArray("java_member_order");
            members.keySet().forEach(order::add);
            SubscriptionType type = distinct.size() <= 1 ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
            round.put("subscription_type", type.toString());
            GroupSpec spec = new GroupSpec() {
                public Collection<String> memberIds() { return members.keySet(); }
                public SubscriptionType subscriptionType() { return type; }
                public boolean isPartitionAssigned(Uuid topicId, int partitionId) {
                    Map<Integer, String> m = inverted.get(topicId);
                    return m != null && m.containsKey(partitionId);
                }
                public MemberSubscription memberSubscription(String memberId) { return members.get(memberId); }
                public MemberAssignment memberAssignment(String memberId) {
                    Member m = members.get(memberId);
                    return m != null ? m : new Member(Optional.empty(), Optional.empty(), Collections.emptySet(), Collections.emptyMap());
                }
            };
            GroupAssignment result;
            try {
                result = newServerAssignor(kind).assign(spec, describer);
            } catch (PartitionAssignorException e) {
                round.put("error", "PartitionAssignorException: " + e.getMessage());
                return;
            }
            ObjectNode asg = round.putObject("assignment");
            Map<String, Map<Uuid, Set<Integer>>> next = new HashMap<>();
            for (JsonNode m : state) {
                String id = m.get("id").asText();
                MemberAssignment a = result.members().get(id);
                Map<Uuid, Set<Integer>> parts = a == null ? Collections.emptyMap() : a.partitions();
                // server assignments are sets: written sorted by topic name, then partition
                List<TopicPartition> flat = new ArrayList<>();
                parts.forEach((t, ps) -> ps.forEach(p -> flat.add(new TopicPartition(names.get(t), p))));
                flat.sort((x, y) -> x.topic().equals(y.topic()) ? Integer.compare(x.partition(), y.partition()) : x.topic().compareTo(y.topic()));
                ArrayNode arr = asg.putArray(id);
                flat.forEach(tp -> arr.add(tp.toString()));
                Map<Uuid, Set<Integer>> copy = new HashMap<>();
                parts.forEach((t, ps) -> copy.put(t, new HashSet<>(ps)));
                next.put(id, copy);
            }
            target = next;
        }
    }

    // ---- helpers -------------------------------------------------------------------------------------

    static Optional<String> optText(JsonNode m, String field) {
        JsonNode v = m.get(field);
        return v == null || v.isNull() ? Optional.empty() : Optional.of(v.asText());
    }

    static String hex(ByteBuffer buf) {
        ByteBuffer b = buf.duplicate();
        StringBuilder sb = new StringBuilder();
        while (b.hasRemaining()) sb.append(String.format("%02x", b.get()));
        return sb.toString();
    }
}
