// Consumer groups through franz-go: kadm's group admin calls, and group members (a kgo client
// with ConsumerGroup) kept between requests under the handle the adapter names them by.
package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func groupAdminOp(ctx context.Context, adm *kadm.Client, op string, r req) (any, error) {
	group, topic := r.str("group"), r.str("topic")
	switch op {
	case "list_groups":
		listed, err := adm.ListGroups(ctx, r.strs("states")...)
		if err != nil {
			return errValue(err), nil
		}
		out := [][]any{}
		for _, g := range listed.Sorted() {
			out = append(out, []any{g.Group, g.State, g.GroupType, g.ProtocolType})
		}
		return out, nil
	case "describe_group":
		return describeGroup(ctx, adm, group)
	case "delete_group":
		resp, err := adm.DeleteGroup(ctx, group)
		if err != nil {
			return errValue(err), nil
		}
		return errOrNil(resp.Err), nil
	case "group_offsets":
		fetched, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return errValue(err), nil
		}
		return offsetsOf(fetched, topic, r.ints("partitions")), nil
	case "alter_group_offsets":
		offsets := kadm.Offsets{}
		for p, o := range r.object("offsets") {
			partition, _ := strconv.Atoi(p)
			offsets.Add(kadm.Offset{Topic: topic, Partition: int32(partition), At: int64(o.(float64)), LeaderEpoch: -1})
		}
		resp, err := adm.CommitOffsets(ctx, group, offsets)
		if err != nil {
			return errValue(err), nil
		}
		failed := map[string]any{}
		for _, ps := range resp {
			for p, o := range ps {
				if o.Err != nil {
					failed[strconv.Itoa(int(p))] = errValue(o.Err)
				}
			}
		}
		if len(failed) == 0 {
			return nil, nil
		}
		return failed, nil
	case "delete_group_offsets":
		set := kadm.TopicsSet{}
		set.Add(topic, r.ints("partitions")...)
		resp, err := adm.DeleteOffsets(ctx, group, set)
		if err != nil {
			return errValue(err), nil
		}
		out := map[string]any{}
		for _, p := range r.ints("partitions") {
			pErr, ok := resp.Lookup(topic, p)
			if !ok {
				return nil, fmt.Errorf("OffsetDelete answered no partition %d", p)
			}
			out[strconv.Itoa(int(p))] = errOrNil(pErr)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown op %s", op)
}

// describeGroup describes a KIP-848 consumer group with ConsumerGroupDescribe, and any other
// group (Kafka answers GROUP_ID_NOT_FOUND there for a group of another type) with the classic
// DescribeGroups, as Kafka's Admin client falls back between the two.
func describeGroup(ctx context.Context, adm *kadm.Client, group string) (any, error) {
	modern, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return errValue(err), nil
	}
	if g := modern[group]; !errors.Is(g.Err, kerr.GroupIDNotFound) {
		if g.Err != nil {
			return errValue(g.Err), nil
		}
		sizes := []int{}
		for _, m := range g.Members {
			n := 0
			for _, ps := range m.Assignment {
				n += len(ps)
			}
			sizes = append(sizes, n)
		}
		sort.Ints(sizes)
		return map[string]any{"type": "consumer", "state": g.State, "assignor": g.AssignorName,
			"members": len(g.Members), "assigned": sizes}, nil
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return errValue(err), nil
	}
	g := described[group]
	if g.Err != nil {
		return errValue(g.Err), nil
	}
	sizes := []int{}
	for _, m := range g.Members {
		n := 0
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				n += len(t.Partitions)
			}
		}
		sizes = append(sizes, n)
	}
	sort.Ints(sizes)
	return map[string]any{"type": "classic", "state": g.State, "protocol_type": g.ProtocolType,
		"protocol": g.Protocol, "members": len(g.Members), "assigned": sizes}, nil
}

// offsetsOf is {partition: [offset, metadata] or null} as OffsetFetch answered, or an error.
func offsetsOf(fetched kadm.OffsetResponses, topic string, partitions []int32) any {
	out := map[string]any{}
	for _, p := range partitions {
		o, ok := fetched.Lookup(topic, p)
		switch {
		case !ok || o.At < 0:
			out[strconv.Itoa(int(p))] = nil
		case o.Err != nil:
			return errValue(o.Err)
		default:
			out[strconv.Itoa(int(p))] = []any{o.At, o.Metadata}
		}
	}
	return out
}

// groupMember is one kgo group consumer; the partition callbacks keep its assignment.
type groupMember struct {
	cl       *kgo.Client
	group    string
	mu       sync.Mutex
	assigned map[int32]bool
}

var members = map[string]*groupMember{}

func closeMembers() {
	for _, m := range members {
		m.cl.Close()
	}
}

func member(bootstrap string, r req) (any, error) {
	handle, topic, step := r.str("handle"), r.str("topic"), r.str("step")
	if step == "open" {
		return nil, openMember(bootstrap, handle, topic, r)
	}
	m, ok := members[handle]
	if !ok {
		return nil, fmt.Errorf("no member %s", handle)
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	switch step {
	case "poll":
		pollCtx, pollCancel := context.WithTimeout(ctx, time.Duration(r.num("timeout_ms", 100))*time.Millisecond)
		defer pollCancel()
		fetches := m.cl.PollFetches(pollCtx)
		out := []any{}
		fetches.EachRecord(func(rec *kgo.Record) { out = append(out, recordValue(rec)) })
		return out, nil
	case "assignment":
		m.mu.Lock()
		defer m.mu.Unlock()
		out := []int32{}
		for p := range m.assigned {
			out = append(out, p)
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out, nil
	case "positions":
		return m.positions(topic), nil
	case "commit":
		return m.commit(ctx, topic, r.object("offsets"))
	case "committed":
		fetched, err := kadm.NewClient(m.cl).FetchOffsets(ctx, m.group)
		if err != nil {
			return errValue(err), nil
		}
		return offsetsOf(fetched, topic, r.ints("partitions")), nil
	case "close":
		delete(members, handle)
		m.cl.Close() // leaves the group
		return nil, nil
	}
	return nil, fmt.Errorf("member step %s", step)
}

func openMember(bootstrap, handle, topic string, r req) error {
	props := r.object("props")
	m := &groupMember{group: fmt.Sprint(props["group.id"]), assigned: map[int32]bool{}}
	track := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range ps[topic] {
				if add {
					m.assigned[p] = true
				} else {
					delete(m.assigned, p)
				}
			}
		}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ConsumerGroup(m.group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.OnPartitionsAssigned(track(true)), kgo.OnPartitionsRevoked(track(false)),
		kgo.OnPartitionsLost(track(false)),
	}
	if props["group.protocol"] == "consumer" {
		opts = append(opts, kgo.ServerSideBalancer()) // KIP-848; needs the range or sticky balancer (the default)
	} else {
		opts = append(opts, kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	m.cl = cl
	if old, ok := members[handle]; ok {
		old.cl.Close()
	}
	members[handle] = m
	return nil
}

// positions is {partition: next offset} for the assigned partitions: past the last record
// polled, else the committed offset the member resumed from, else -1 (not positioned yet).
func (m *groupMember) positions(topic string) map[string]int64 {
	uncommitted, committed := m.cl.UncommittedOffsets()[topic], m.cl.CommittedOffsets()[topic]
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int64{}
	for p := range m.assigned {
		pos := int64(-1)
		if eo, ok := committed[p]; ok {
			pos = eo.Offset
		}
		if eo, ok := uncommitted[p]; ok {
			pos = eo.Offset
		}
		out[strconv.Itoa(int(p))] = pos
	}
	return out
}

// commit commits {partition: [offset, metadata]} through kgo's own commit path
// (CommitOffsetsSync: this member's id and generation, or member epoch under KIP-848); kgo
// commits carry no metadata of their own, so PreCommitFnContext adds it to the request.
func (m *groupMember) commit(ctx context.Context, topic string, offsets map[string]any) (any, error) {
	toCommit := map[int32]kgo.EpochOffset{}
	metadata := map[int32]string{}
	for p, v := range offsets {
		pair := v.([]any)
		partition, _ := strconv.Atoi(p)
		toCommit[int32(partition)] = kgo.EpochOffset{Epoch: -1, Offset: int64(pair[0].(float64))}
		metadata[int32(partition)] = fmt.Sprint(pair[1])
	}
	ctx = kgo.PreCommitFnContext(ctx, func(commit *kmsg.OffsetCommitRequest) error {
		for i := range commit.Topics {
			for j := range commit.Topics[i].Partitions {
				part := &commit.Topics[i].Partitions[j]
				if md, ok := metadata[part.Partition]; ok {
					part.Metadata = &md
				}
			}
		}
		return nil
	})
	var result any
	m.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: toCommit},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				result = errValue(err)
				return
			}
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if err := kerr.ErrorForCode(rp.ErrorCode); err != nil && result == nil {
						result = errValue(err)
					}
				}
			}
		})
	return result, nil
}
