// Producing and consuming through kgo: a new client per request, as CompatDriver makes a new
// KafkaProducer / KafkaConsumer per request.
package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// producerOpts maps the adapter's producer settings (Kafka's names, where kgo has the same
// knob) onto kgo options.
func producerOpts(props map[string]any) ([]kgo.Opt, error) {
	// No RecordDeliveryTimeout unless asked: kgo measures it from each record's Timestamp, so
	// records stamped hours ago (as scenarios stamp them) would fail at once; the request's
	// context bounds a produce instead.
	opts := []kgo.Opt{kgo.ProducerLinger(5 * time.Millisecond), kgo.ProduceRequestTimeout(10 * time.Second)}
	ms := func(v any) time.Duration {
		n, _ := strconv.Atoi(fmt.Sprint(v))
		return time.Duration(n) * time.Millisecond
	}
	for key, v := range props {
		value := fmt.Sprint(v)
		switch key {
		case "acks":
			switch value {
			case "all", "-1":
				opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
			case "1":
				opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
			case "0":
				opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
			default:
				return nil, fmt.Errorf("acks %s", value)
			}
		case "compression.type":
			codec := map[string]kgo.CompressionCodec{
				"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
				"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
			}[value]
			opts = append(opts, kgo.ProducerBatchCompression(codec))
		case "linger.ms":
			opts = append(opts, kgo.ProducerLinger(ms(v)))
		case "delivery.timeout.ms":
			opts = append(opts, kgo.RecordDeliveryTimeout(ms(v)))
		case "request.timeout.ms":
			opts = append(opts, kgo.ProduceRequestTimeout(ms(v)))
		case "max.request.size":
			n, _ := strconv.Atoi(value)
			opts = append(opts, kgo.ProducerBatchMaxBytes(int32(n)), kgo.BrokerMaxWriteBytes(int32(2*n)))
		case "enable.idempotence":
			if value == "false" {
				opts = append(opts, kgo.DisableIdempotentWrite())
			}
		default:
			return nil, fmt.Errorf("producer setting %s has no kgo option here", key)
		}
	}
	return opts, nil
}

func produce(bootstrap string, r req) (any, error) {
	opts, err := producerOpts(r.object("props"))
	if err != nil {
		return nil, err
	}
	raw, _ := r["records"].([]any)
	records := make([]*kgo.Record, len(raw))
	explicit := 0
	for i, v := range raw {
		rec := req(v.(map[string]any))
		kr := &kgo.Record{Topic: r.str("topic"), Key: unb64(rec["key"]), Value: unb64(rec["value"])}
		if p, ok := rec["partition"].(float64); ok {
			kr.Partition = int32(p)
			explicit++
		}
		if ts, ok := rec["timestamp"].(float64); ok {
			kr.Timestamp = time.UnixMilli(int64(ts))
		}
		for _, h := range rec["headers"].([]any) {
			pair := h.([]any)
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: pair[0].(string), Value: unb64(pair[1])})
		}
		records[i] = kr
	}
	switch explicit {
	case len(records): // every record names its partition
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	case 0: // kgo's default partitioner chooses
	default:
		return nil, errors.New("records mixing explicit and chosen partitions")
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(strings.Split(bootstrap, ",")...))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*requestTimeout)
	defer cancel()
	results := make([]any, len(records))
	done := make(chan struct{}, len(records))
	for i, rec := range records {
		cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
			if err != nil {
				results[i] = errValue(err)
			} else {
				results[i] = rec.Offset // -1 under acks=0: nothing acknowledged it
			}
			done <- struct{}{}
		})
		if r.flag("sync") {
			_ = cl.Flush(ctx)
		}
	}
	_ = cl.Flush(ctx)
	for range records {
		<-done
	}
	return results, nil
}

func recordValue(rec *kgo.Record) map[string]any {
	headers := [][]any{}
	for _, h := range rec.Headers {
		headers = append(headers, []any{h.Key, b64(h.Value)})
	}
	tsType := "CreateTime"
	if rec.Attrs.TimestampType() == 1 {
		tsType = "LogAppendTime"
	}
	return map[string]any{"partition": rec.Partition, "offset": rec.Offset, "key": b64(rec.Key),
		"value": b64(rec.Value), "headers": headers, "timestamp": rec.Timestamp.UnixMilli(), "timestamp_type": tsType}
}

// consumerOpts maps the adapter's consumer settings onto kgo options.
func consumerOpts(props map[string]any) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	for key, v := range props {
		value := fmt.Sprint(v)
		n, _ := strconv.Atoi(value)
		switch key {
		case "auto.offset.reset":
			reset := map[string]kgo.Offset{"earliest": kgo.NewOffset().AtStart(), "latest": kgo.NewOffset().AtEnd(),
				"none": kgo.NoResetOffset()}[value]
			opts = append(opts, kgo.ConsumeResetOffset(reset))
		case "fetch.min.bytes":
			opts = append(opts, kgo.FetchMinBytes(int32(n)))
		case "fetch.max.wait.ms":
			opts = append(opts, kgo.FetchMaxWait(time.Duration(n)*time.Millisecond))
		case "fetch.max.bytes":
			opts = append(opts, kgo.FetchMaxBytes(int32(n)))
		case "max.partition.fetch.bytes":
			opts = append(opts, kgo.FetchMaxPartitionBytes(int32(n)))
		case "isolation.level":
			if value == "read_committed" {
				opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			}
		default:
			return nil, fmt.Errorf("consumer setting %s has no kgo option here", key)
		}
	}
	return opts, nil
}

// startPositions resolves a symbolic start (earliest, latest, a timestamp) to offsets with
// ListOffsets, only to know where each partition's position starts: kgo has no position call,
// and a partition that yields no record must still count as at its start.
func startPositions(ctx context.Context, bootstrap, topic string, start any) (map[int32]int64, error) {
	out := map[int32]int64{}
	if n, ok := start.(float64); ok {
		return nil, fmt.Errorf("numeric start %v is its own position", n)
	}
	adm := kadm.NewClient(adminClient(bootstrap))
	var (
		listed kadm.ListedOffsets
		err    error
	)
	switch s := start.(type) {
	case string:
		if s == "earliest" {
			listed, err = adm.ListStartOffsets(ctx, topic)
		} else {
			listed, err = adm.ListEndOffsets(ctx, topic)
		}
	case map[string]any:
		listed, err = adm.ListOffsetsAfterMilli(ctx, int64(s["timestamp"].(float64)), topic)
	}
	if err != nil {
		return nil, err
	}
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

func consume(bootstrap string, r req) (any, error) {
	opts, err := consumerOpts(r.object("props"))
	if err != nil {
		return nil, err
	}
	topic, start := r.str("topic"), r["start"]
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.num("timeout_ms", 15000))*time.Millisecond)
	defer cancel()
	var offset kgo.Offset
	position := map[int32]int64{}
	switch s := start.(type) {
	case float64:
		offset = kgo.NewOffset().At(int64(s))
		for _, p := range r.ints("partitions") {
			position[p] = int64(s)
		}
	case string:
		offset = map[string]kgo.Offset{"earliest": kgo.NewOffset().AtStart(), "latest": kgo.NewOffset().AtEnd()}[s]
	case map[string]any:
		offset = kgo.NewOffset().AfterMilli(int64(s["timestamp"].(float64)))
	}
	if len(position) == 0 {
		if position, err = startPositions(ctx, bootstrap, topic, start); err != nil {
			return map[string]any{"records": []any{}, "error": errName(err)}, nil
		}
	}
	partitions := map[int32]kgo.Offset{}
	for _, p := range r.ints("partitions") {
		partitions[p] = offset
	}
	opts = append(opts, kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: partitions}))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	until := r.object("until")
	maxRecords := int(r.num("max_records", 1<<31-1))
	records := []any{}
	result := map[string]any{}
	reached := func() bool {
		if until == nil {
			return false
		}
		for p, end := range until {
			partition, _ := strconv.Atoi(p)
			if position[int32(partition)] < int64(end.(float64)) {
				return false
			}
		}
		return true
	}
	for len(records) < maxRecords && !reached() && ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				result["error"] = errName(fe.Err)
			}
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			position[rec.Partition] = rec.Offset + 1
			if !rec.Attrs.IsControl() && len(records) < maxRecords { // control records only move the position
				records = append(records, recordValue(rec))
			}
		})
		if result["error"] != nil {
			break
		}
	}
	result["records"] = records
	return result, nil
}
