// Command franz-driver is the franz-go client stack of the compat suite, as one long-lived
// process: kgo (producer, direct and group consumers) and kadm (admin), franz-go's public APIs.
//
// It speaks the JSON-lines protocol of compat/java/CompatDriver.java: one request per line on
// stdin ({"op": ..., "bootstrap": ..., args}), one answer per line on stdout, {"ok": value} or
// {"fail": "what broke"}, after a {"ready": true} greeting. Kafka errors are values
// ({"error": "TOPIC_ALREADY_EXISTS"}, the protocol name kerr gives), bytes travel base64-encoded.
// compat/clients/franz_go.py starts it; compat/deps.py builds it.
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// requestTimeout bounds every admin call and produce flush, as CompatDriver's TIMEOUT_MS does.
const requestTimeout = 20 * time.Second

// req is one decoded request line; args are read from it by name.
type req map[string]any

func (r req) str(key string) string {
	s, _ := r[key].(string)
	return s
}

func (r req) num(key string, def int64) int64 {
	if f, ok := r[key].(float64); ok {
		return int64(f)
	}
	return def
}

func (r req) flag(key string) bool {
	b, _ := r[key].(bool)
	return b
}

func (r req) strs(key string) []string {
	var out []string
	if list, ok := r[key].([]any); ok {
		for _, v := range list {
			out = append(out, fmt.Sprint(v))
		}
	}
	return out
}

func (r req) ints(key string) []int32 {
	var out []int32
	if list, ok := r[key].([]any); ok {
		for _, v := range list {
			if f, ok := v.(float64); ok {
				out = append(out, int32(f))
			}
		}
	}
	return out
}

func (r req) object(key string) map[string]any {
	m, _ := r[key].(map[string]any)
	return m
}

// errValue names an error as the scenarios see it: the Kafka protocol name when the error
// carries a broker error code, else franz-go's own error text (a client-side refusal).
func errValue(err error) map[string]any {
	return map[string]any{"error": errName(err)}
}

func errName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	switch {
	case errors.Is(err, kgo.ErrRecordTimeout):
		return "RecordTimeout"
	case errors.Is(err, kgo.ErrRecordRetries):
		return "RecordRetries"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	}
	var dataLoss *kgo.ErrDataLoss
	if errors.As(err, &dataLoss) {
		return "DataLoss"
	}
	return err.Error()
}

// errOrNil is the value of a call that answers nothing on success.
func errOrNil(err error) any {
	if err == nil {
		return nil
	}
	return errValue(err)
}

func unb64(v any) []byte {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(fmt.Sprintf("bad base64 %q", s))
	}
	if b == nil {
		b = []byte{} // an empty key or value is not a null one
	}
	return b
}

func b64(b []byte) any {
	if b == nil {
		return nil
	}
	return base64.StdEncoding.EncodeToString(b)
}

// clients keeps one admin kgo client per bootstrap (the Admin client's counterpart).
var clients = map[string]*kgo.Client{}

func adminClient(bootstrap string) *kgo.Client {
	if cl, ok := clients[bootstrap]; ok {
		return cl
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		panic(err)
	}
	clients[bootstrap] = cl
	return cl
}

func dispatch(r req) (any, error) {
	bootstrap := r.str("bootstrap")
	switch r.str("op") {
	case "produce":
		return produce(bootstrap, r)
	case "consume":
		return consume(bootstrap, r)
	case "member":
		return member(bootstrap, r)
	case "raw_offset_commit":
		return rawOffsetCommit(bootstrap, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	return adminOp(ctx, adminClient(bootstrap), r)
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := json.NewEncoder(os.Stdout)
	_ = out.Encode(map[string]any{"ready": true})
	for in.Scan() {
		answer := answerLine(in.Bytes())
		if err := out.Encode(answer); err != nil {
			_ = out.Encode(map[string]any{"fail": "answer not JSON: " + err.Error()})
		}
	}
	for _, cl := range clients {
		cl.Close()
	}
	closeMembers()
}

// answerLine runs one request; a panic or a driver error is a "fail" answer, not an exit.
func answerLine(line []byte) (answer map[string]any) {
	defer func() {
		if p := recover(); p != nil {
			answer = map[string]any{"fail": fmt.Sprint(p)}
		}
	}()
	var r req
	if err := json.Unmarshal(line, &r); err != nil {
		return map[string]any{"fail": "bad request: " + err.Error()}
	}
	value, err := dispatch(r)
	if err != nil {
		return map[string]any{"fail": err.Error()}
	}
	return map[string]any{"ok": value}
}
