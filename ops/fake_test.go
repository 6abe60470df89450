package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/inspect"
	"github.com/eventhub/eventhub/ops"
)

// fakeAdmin plays every role of the endpoints without an event bus, for
// the tests of what the handler does itself (routing, refusals, audit,
// parameters): it knows the topics it was given, each with no events, and
// counts the calls that would change something.
type fakeAdmin struct {
	topics  []string
	changes atomic.Int32
	ready   error
}

// newFakeEnv serves the ops handler over a fakeAdmin knowing topics.
func newFakeEnv(t testing.TB, oc ops.Config, topics ...string) (*env, *fakeAdmin) {
	t.Helper()
	f := &fakeAdmin{topics: topics}
	e := &env{logs: &logRecorder{}}
	oc.Bus = f
	e.serve(t, oc)
	return e, f
}

func (f *fakeAdmin) known(topic string) error {
	if !slices.Contains(f.topics, topic) {
		return fmt.Errorf("%w: topic %s", facade.ErrNotFound, topic)
	}
	return nil
}

func (f *fakeAdmin) change(topic string) error {
	f.changes.Add(1)
	return f.known(topic)
}

func (f *fakeAdmin) Ready(context.Context) error { return f.ready }
func (f *fakeAdmin) Closed() bool                { return false }

func (f *fakeAdmin) Topic(_ context.Context, topic string) (*inspect.Topic, error) {
	if err := f.known(topic); err != nil {
		return nil, err
	}
	return &inspect.Topic{Topic: topic, StreamName: "S", Filters: []string{topic}}, nil
}
func (f *fakeAdmin) StreamState(_ context.Context, topic string) (inspect.StreamState, error) {
	return inspect.StreamState{}, f.known(topic)
}
func (f *fakeAdmin) Streams(context.Context) ([]inspect.StreamDescription, error) {
	return []inspect.StreamDescription{{Name: "S", Subjects: f.topics, Topics: f.topics}}, nil
}
func (f *fakeAdmin) DescribeStream(_ context.Context, topic string) (*inspect.StreamDescription, error) {
	return &inspect.StreamDescription{Name: "S", Subjects: f.topics, Topics: f.topics}, f.known(topic)
}
func (f *fakeAdmin) TopicCount(_ context.Context, topic string) (uint64, error) {
	return 0, f.known(topic)
}
func (f *fakeAdmin) DeclareTopicSettings(_ context.Context, s inspect.TopicSettings) (string, bool, error) {
	f.changes.Add(1)
	return "S", true, nil
}
func (f *fakeAdmin) DeleteTopic(_ context.Context, topic string) error { return f.change(topic) }
func (f *fakeAdmin) Purge(_ context.Context, topic, _ string, _ uint64) (uint64, error) {
	return 0, f.change(topic)
}

func (f *fakeAdmin) Event(_ context.Context, topic string, seq uint64) (*inspect.StoredEvent, error) {
	return nil, fmt.Errorf("%w: event %d of %s", facade.ErrNotFound, seq, topic)
}
func (f *fakeAdmin) DeleteEvent(_ context.Context, topic string, _ uint64) error {
	return f.change(topic)
}
func (f *fakeAdmin) Scan(_ context.Context, topic string, _ inspect.Scan, _ func(*inspect.StoredEvent) bool) (uint64, bool, error) {
	return 0, true, f.known(topic)
}
func (f *fakeAdmin) LatestByKey(_ context.Context, topic string, _ []string) (map[string]*facade.EventRecord, error) {
	return nil, f.known(topic)
}
func (f *fakeAdmin) SeqOfID(_ context.Context, topic, id string) (uint64, error) {
	return 0, fmt.Errorf("%w: %s in %s", facade.ErrUnknownID, id, topic)
}
func (f *fakeAdmin) SeqAtTime(_ context.Context, topic string, _ time.Time) (uint64, error) {
	return 1, f.known(topic)
}
func (f *fakeAdmin) PublishDerived(_ context.Context, topic string, _ json.RawMessage, _ facade.PublishOptions, _ string) (*facade.EventRecord, error) {
	return nil, f.change(topic)
}

func (f *fakeAdmin) GroupTopics(context.Context) ([]string, error) { return nil, nil }
func (f *fakeAdmin) Groups(_ context.Context, topic string) ([]inspect.GroupInfo, error) {
	return nil, f.known(topic)
}
func (f *fakeAdmin) GroupLag(_ context.Context, topic, group string) (*inspect.GroupLag, error) {
	return nil, fmt.Errorf("%w: group %s of %s", facade.ErrNotFound, group, topic)
}
func (f *fakeAdmin) SeekGroup(_ context.Context, topic, _ string, _ uint64) (*inspect.GroupInfo, error) {
	return nil, f.change(topic)
}
func (f *fakeAdmin) PauseGroup(_ context.Context, topic, _ string, _ time.Time) (*inspect.GroupInfo, error) {
	return nil, f.change(topic)
}
func (f *fakeAdmin) ResumeGroup(_ context.Context, topic, _ string) (*inspect.GroupInfo, error) {
	return nil, f.change(topic)
}
func (f *fakeAdmin) DeleteGroup(_ context.Context, topic, _ string) error { return f.change(topic) }

func (f *fakeAdmin) DeleteKey(_ context.Context, topic, _ string, _ facade.DeleteOptions) (*facade.EventRecord, error) {
	return nil, f.change(topic)
}

func (f *fakeAdmin) NextSeq(_ context.Context, topic, _ string, _ uint64) (uint64, bool, error) {
	return 0, false, f.known(topic)
}
func (f *fakeAdmin) Replay(_ context.Context, topic string, _ inspect.ReplayRange, _ func(*inspect.StoredEvent) (bool, error)) error {
	return f.known(topic)
}

var (
	_ ops.Topics       = (*fakeAdmin)(nil)
	_ ops.Events       = (*fakeAdmin)(nil)
	_ ops.Groups       = (*fakeAdmin)(nil)
	_ ops.Keys         = (*fakeAdmin)(nil)
	_ ops.ExportSource = (*fakeAdmin)(nil)
)
