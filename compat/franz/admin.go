// The kadm operations of the driver: one case per compat client operation, each answering a
// plain JSON value built from kadm's public results.
package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func adminOp(ctx context.Context, cl *kgo.Client, r req) (any, error) {
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(requestTimeout.Milliseconds()))
	switch op := r.str("op"); op {
	case "create_topic":
		return createTopic(ctx, adm, r)
	case "delete_topic":
		resp, err := adm.DeleteTopics(ctx, r.str("name"))
		if err != nil {
			return errValue(err), nil
		}
		return errOrNil(resp[r.str("name")].Err), nil
	case "create_partitions":
		set, name := int(r.num("total", 0)), r.str("name")
		update := adm.UpdatePartitions
		if r.flag("validate_only") {
			update = adm.ValidateUpdatePartitions
		}
		resp, err := update(ctx, set, name)
		if err != nil {
			return errValue(err), nil
		}
		return errOrNil(resp[name].Err), nil
	case "describe_topic":
		return describeTopic(ctx, adm, r.str("name"))
	case "list_topics":
		topics, err := adm.ListTopicsWithInternal(ctx)
		if err != nil {
			return errValue(err), nil
		}
		return topics.Names(), nil // sorted
	case "describe_cluster":
		return describeCluster(ctx, adm)
	case "describe_configs":
		return describeConfigs(ctx, adm, r)
	case "alter_configs":
		return alterConfigs(ctx, adm, r)
	case "delete_records":
		topic, partition := r.str("topic"), int32(r.num("partition", 0))
		offsets := kadm.Offsets{}
		offsets.Add(kadm.Offset{Topic: topic, Partition: partition, At: r.num("before", 0)})
		resp, err := adm.DeleteRecords(ctx, offsets)
		if err != nil {
			return errValue(err), nil
		}
		got, err := resp.On(topic, partition, nil)
		if err == nil {
			err = got.Err
		}
		if err != nil {
			return errValue(err), nil
		}
		return got.LowWatermark, nil
	case "list_offsets":
		return listOffsets(ctx, adm, r)
	case "api_versions":
		return apiVersions(ctx, adm, false)
	case "version_guess":
		return apiVersions(ctx, adm, true)
	case "describe_acls":
		return describeACLs(ctx, adm)
	case "describe_client_quotas":
		return describeClientQuotas(ctx, adm)
	default:
		return groupAdminOp(ctx, adm, op, r)
	}
}

func createTopic(ctx context.Context, adm *kadm.Client, r req) (any, error) {
	name := r.str("name")
	configs := map[string]*string{}
	for k, v := range r.object("configs") {
		value := fmt.Sprint(v)
		configs[k] = &value
	}
	create := adm.CreateTopics
	if r.flag("validate_only") {
		create = adm.ValidateCreateTopics
	}
	resp, err := create(ctx, int32(r.num("partitions", 1)), int16(r.num("rf", 1)), configs, name)
	if err != nil {
		return errValue(err), nil
	}
	return errOrNil(resp[name].Err), nil
}

func describeTopic(ctx context.Context, adm *kadm.Client, name string) (any, error) {
	md, err := adm.Metadata(ctx, name)
	if err != nil {
		return errValue(err), nil
	}
	td, ok := md.Topics[name]
	if !ok {
		return errValue(kerr.UnknownTopicOrPartition), nil
	}
	if td.Err != nil {
		return errValue(td.Err), nil
	}
	var parts []any
	for _, p := range td.Partitions.Sorted() {
		parts = append(parts, map[string]any{
			"partition": p.Partition, "leader": p.Leader, "replicas": nonNil(p.Replicas), "isr": nonNil(p.ISR),
		})
	}
	return map[string]any{"internal": td.IsInternal, "partitions": parts}, nil
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

func describeCluster(ctx context.Context, adm *kadm.Client) (any, error) {
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return errValue(err), nil
	}
	var nodes [][]any
	for _, b := range md.Brokers {
		nodes = append(nodes, []any{b.NodeID, fmt.Sprintf("%s:%d", b.Host, b.Port)})
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i][0].(int32) < nodes[j][0].(int32) })
	return map[string]any{"cluster_id": md.Cluster, "controller": md.Controller, "nodes": nodes}, nil
}

func describeConfigs(ctx context.Context, adm *kadm.Client, r req) (any, error) {
	name := r.str("name")
	var (
		configs kadm.ResourceConfigs
		err     error
	)
	if r.str("type") == "broker" {
		var ids []int32
		if name != "" { // kadm describes the cluster-wide defaults when given no broker
			id, convErr := strconv.ParseInt(name, 10, 32)
			if convErr != nil {
				return errValue(convErr), nil
			}
			ids = append(ids, int32(id))
		}
		configs, err = adm.DescribeBrokerConfigs(ctx, ids...)
	} else {
		configs, err = adm.DescribeTopicConfigs(ctx, name)
	}
	if err != nil {
		return errValue(err), nil
	}
	if len(configs) != 1 {
		return nil, fmt.Errorf("DescribeConfigs answered %d resources for one", len(configs))
	}
	rc := configs[0]
	if rc.Err != nil {
		return errValue(rc.Err), nil
	}
	keys := map[string]bool{}
	for _, k := range r.strs("keys") {
		keys[k] = true
	}
	out := map[string]any{}
	for _, c := range rc.Configs {
		if len(keys) > 0 && !keys[c.Key] {
			continue
		}
		entry := map[string]any{"value": c.Value, "source": c.Source.String(), "sensitive": c.Sensitive}
		if r.flag("synonyms") {
			syns := [][]any{}
			for _, s := range c.Synonyms {
				syns = append(syns, []any{s.Key, s.Value, s.Source.String()})
			}
			entry["synonyms"] = syns
		}
		out[c.Key] = entry
	}
	return out, nil
}

func alterConfigs(ctx context.Context, adm *kadm.Client, r req) (any, error) {
	var alters []kadm.AlterConfig
	for _, raw := range r["ops"].([]any) {
		o := raw.([]any)
		alter := kadm.AlterConfig{Name: o[0].(string), Op: kadm.SetConfig}
		if o[1] == "delete" {
			alter.Op = kadm.DeleteConfig
		}
		if v, ok := o[2].(string); ok {
			alter.Value = &v
		}
		alters = append(alters, alter)
	}
	topic := r.str("topic")
	resp, err := adm.AlterTopicConfigs(ctx, alters, topic)
	if err != nil {
		return errValue(err), nil
	}
	for _, a := range resp {
		if a.Name == topic {
			return errOrNil(a.Err), nil
		}
	}
	return nil, fmt.Errorf("IncrementalAlterConfigs answered no resource %q", topic)
}

func listOffsets(ctx context.Context, adm *kadm.Client, r req) (any, error) {
	topic, partition := r.str("topic"), int32(r.num("partition", 0))
	var (
		listed kadm.ListedOffsets
		err    error
	)
	spec, committed := r["spec"], r.str("isolation") == "read_committed"
	switch {
	case spec == "earliest":
		listed, err = adm.ListStartOffsets(ctx, topic)
	case spec == "latest" && committed:
		listed, err = adm.ListCommittedOffsets(ctx, topic)
	case spec == "latest":
		listed, err = adm.ListEndOffsets(ctx, topic)
	case spec == "max_timestamp":
		listed, err = adm.ListMaxTimestampOffsets(ctx, topic)
	default:
		ts, ok := spec.(float64)
		if !ok {
			return nil, fmt.Errorf("offset spec %v", spec)
		}
		listed, err = adm.ListOffsetsAfterMilli(ctx, int64(ts), topic)
	}
	if err != nil {
		return errValue(err), nil
	}
	if bad, ok := listed.Lookup(topic, -1); ok { // kadm's entry for a topic metadata refused
		return errValue(bad.Err), nil
	}
	got, ok := listed.Lookup(topic, partition)
	if !ok { // kadm asks only for the partitions metadata names
		return map[string]any{"error": "kadm: partition not in metadata"}, nil
	}
	if got.Err != nil {
		return errValue(got.Err), nil
	}
	return map[string]any{"offset": got.Offset, "timestamp": got.Timestamp}, nil
}

// apiVersions answers {api key: [min, max]} of the bootstrap broker, or (guess) the Kafka
// version kversion infers from those ranges.
func apiVersions(ctx context.Context, adm *kadm.Client, guess bool) (any, error) {
	all, err := adm.ApiVersions(ctx)
	if err != nil {
		return errValue(err), nil
	}
	sorted := all.Sorted()
	if len(sorted) == 0 {
		return nil, fmt.Errorf("no broker answered ApiVersions")
	}
	v := sorted[0]
	if v.Err != nil {
		return errValue(v.Err), nil
	}
	if guess {
		return v.VersionGuess(), nil
	}
	out := map[string]any{}
	v.EachKeySorted(func(key, minV, maxV int16) { out[strconv.Itoa(int(key))] = []int16{minV, maxV} })
	return out, nil
}

func describeACLs(ctx context.Context, adm *kadm.Client) (any, error) {
	filter := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations().
		Allow().AllowHosts().Deny().DenyHosts()
	results, err := adm.DescribeACLs(ctx, filter)
	if err != nil {
		return errValue(err), nil
	}
	acls := [][]any{}
	for _, res := range results {
		if res.Err != nil {
			return errValue(res.Err), nil
		}
		for _, d := range res.Described {
			acls = append(acls, []any{d.Principal, d.Host, d.Type.String(), d.Name, d.Pattern.String(),
				d.Operation.String(), d.Permission.String()})
		}
	}
	return acls, nil
}

func describeClientQuotas(ctx context.Context, adm *kadm.Client) (any, error) {
	quotas, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		return errValue(err), nil
	}
	out := []any{}
	for _, q := range quotas {
		out = append(out, fmt.Sprint(q.Entity, q.Values))
	}
	return out, nil
}

// rawOffsetCommit sends one OffsetCommit for partition 0 with the given generation and member
// id (kgo routes it to the group's coordinator) and answers the partition's error. The topic
// goes by name and by id (from metadata), as v10+ names topics by id.
func rawOffsetCommit(bootstrap string, r req) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	md, err := kadm.NewClient(adminClient(bootstrap)).Metadata(ctx, r.str("topic"))
	if err != nil {
		return errValue(err), nil
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = r.str("group")
	commit.Generation = int32(r.num("generation", -1))
	commit.MemberID = r.str("member")
	topic := kmsg.NewOffsetCommitRequestTopic()
	topic.Topic, topic.TopicID = r.str("topic"), md.Topics[r.str("topic")].ID
	part := kmsg.NewOffsetCommitRequestTopicPartition()
	part.Offset = r.num("offset", 0)
	topic.Partitions = append(topic.Partitions, part)
	commit.Topics = append(commit.Topics, topic)
	resp, err := commit.RequestWith(ctx, adminClient(bootstrap))
	if err != nil {
		return errValue(err), nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			return errOrNil(kerr.ErrorForCode(p.ErrorCode)), nil
		}
	}
	return nil, fmt.Errorf("OffsetCommit answered no partition")
}
