package jetstream

// The admin handle: the operator's actions on topics, groups and stored
// events, apart from the bus's user API.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// ErrNotOwnStream is returned when a topic's stream is shared with other
// topics (a family stream) or was made outside the hub, and an operation
// would change or delete what other topics hold. Its code is
// "not_own_stream".
var ErrNotOwnStream = &facade.Error{Code: "not_own_stream", Msg: "the topic's stream is not the hub's own stream of this topic"}

// Admin is the operator's handle on a [Bus]: it browses and describes
// streams and stored events, declares, purges and deletes topics, deletes
// events, and lists, seeks, pauses, resumes and deletes groups. It has the
// bus's user API too (the embedded Bus). Get one with [Bus.Admin]; it is
// valid as long as the bus and safe for concurrent use.
type Admin struct {
	*Bus
}

// Admin returns the operator's handle on b.
func (b *Bus) Admin() *Admin { return &Admin{Bus: b} }

// DeclareTopic creates the stream of topic tc.Pattern (a topic, not a
// pattern) with tc's retention, size limit, duplicate window, compaction,
// storage and replicas, or, when the hub's own stream of the topic exists,
// sets its retention, size limit, duplicate window and compaction to tc's,
// and its delete markers when tc has them (storage and replicas of an
// existing stream stay as they are). It
// returns the stream's name and whether it was created. A stream that
// captures the topic but is shared or made outside the hub is left alone:
// [ErrNotOwnStream]. Making a stream compacted drops all but the newest
// event of every key. A creation counts against the topic quota of the
// principal ctx carries (Config.Guard). It blocks on JetStream API calls.
func (a *Admin) DeclareTopic(ctx context.Context, tc TopicConfig) (name string, created bool, err error) {
	b := a.Bus
	topic := tc.Pattern
	if strings.ContainsAny(topic, "*>") {
		return "", false, fmt.Errorf("%w: %q is a pattern; declare a topic family in the configuration", facade.ErrBadTopic, topic)
	}
	if err := facade.ValidateTopic(topic); err != nil {
		return "", false, err
	}
	if tc.Stream != "" {
		return "", false, fmt.Errorf("%w: a declared topic gets its own stream; family streams are configured", ErrNotOwnStream)
	}
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	want := b.cfg.streamConfig(topic, tc)
	b.forgetTopic(topic) // look the stream up afresh
	ti, err := b.existingTopic(ctx, topic)
	if errors.Is(err, facade.ErrNotFound) {
		undo, err := b.guardTopic(ctx, topic, &want)
		if err != nil {
			return "", false, err
		}
		s, err := b.js.CreateStream(ctx, want)
		if err != nil {
			undo()
			return "", false, fmt.Errorf("create stream %s for %s: %w", want.Name, topic, translate(err))
		}
		b.forgetTopic(topic)
		if c := b.catalogue.Load(); c != nil {
			c.noteStream(s.CachedInfo())
		}
		b.log.Info("stream declared", "stream", want.Name, "topic", topic, "max_age", want.MaxAge,
			"max_bytes", want.MaxBytes, "compaction", tc.Compaction)
		return s.CachedInfo().Config.Name, true, nil
	}
	if err != nil {
		return "", false, err
	}
	if !ti.own() {
		return ti.name, false, fmt.Errorf("%w: topic %s is held by stream %s; change it with: nats stream edit %s", ErrNotOwnStream, topic, ti.name, ti.name)
	}
	info, err := ti.stream.Info(ctx)
	if err != nil {
		return "", false, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ti.name, err)
	}
	sc := info.Config
	sc.MaxAge, sc.MaxBytes, sc.MaxMsgsPerSubject, sc.Duplicates = want.MaxAge, want.MaxBytes, want.MaxMsgsPerSubject, want.Duplicates
	if want.SubjectDeleteMarkerTTL > 0 {
		sc.SubjectDeleteMarkerTTL, sc.AllowMsgTTL, sc.AllowRollup, sc.DenyPurge = want.SubjectDeleteMarkerTTL, true, true, false
	}
	if _, err := b.js.UpdateStream(ctx, sc); err != nil {
		return "", false, fmt.Errorf("update stream %s of %s: %w", ti.name, topic, translate(err))
	}
	b.forgetTopic(topic)
	b.log.Info("stream updated", "stream", ti.name, "topic", topic, "max_age", sc.MaxAge,
		"max_bytes", sc.MaxBytes, "compaction", tc.Compaction)
	return ti.name, false, nil
}

// DeleteTopic deletes the hub's own stream of topic with every event and
// every group on it. A stream shared with other topics or made outside the
// hub is not deleted ([ErrNotOwnStream]); [facade.ErrNotFound] when no
// stream captures the topic. A later publish or subscribe creates the topic
// again. It blocks on JetStream API calls.
func (a *Admin) DeleteTopic(ctx context.Context, topic string) error {
	b := a.Bus
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	b.forgetTopic(topic) // look the stream up afresh
	ti, err := b.existingTopic(ctx, topic)
	if err != nil {
		return err
	}
	if !ti.own() {
		return fmt.Errorf("%w: topic %s is held by stream %s, which may hold other topics; purge the topic instead, or delete the stream with: nats stream rm %s",
			ErrNotOwnStream, topic, ti.name, ti.name)
	}
	err = b.js.DeleteStream(ctx, ti.name)
	b.forgetTopic(topic)
	if c := b.catalogue.Load(); c != nil && err == nil {
		c.forgetStream(ti.name)
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w: topic %s does not exist", facade.ErrNotFound, topic)
	}
	if err != nil {
		return fmt.Errorf("delete stream %s of %s: %w", ti.name, topic, translate(err))
	}
	b.log.Warn("stream deleted", "stream", ti.name, "topic", topic)
	return nil
}
