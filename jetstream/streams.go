package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/pattern"
)

// topicInfo is what the bus knows of the stream holding a topic.
type topicInfo struct {
	topic  string
	stream jetstream.Stream
	name   string
	// keyed: the stream captures the topic's keyed subjects.
	keyed bool
	// compacted: the stream keeps one event per subject.
	compacted bool
	// shared: the stream holds other topics too (a family or an
	// operator-made stream), so consumer names include the topic.
	shared bool
	// filters are the consumer filter subjects of the topic.
	filters []string
	obs     TopicObserver
	// match, for a pattern, reports whether the pattern delivers an
	// event of topic (the filters also pass keyed subjects that look like
	// deeper topics, and dead-letter topics); nil for a topic.
	match func(topic string) bool
}

// own reports whether ti's stream is the hub's own stream of the topic,
// made for it alone.
func (ti *topicInfo) own() bool { return !ti.shared && ti.name == streamNameFor(ti.topic) }

// topic returns the stream information for topic, creating the stream on
// first use. An existing stream that captures the topic's subject (made by an
// operator, or a configured family stream) is used as it is.
func (b *Bus) topic(ctx context.Context, topic string) (*topicInfo, error) {
	return b.resolveTopic(ctx, topic, true)
}

// existingTopic is topic without creating a stream: ErrNotFound when no
// stream captures it.
func (b *Bus) existingTopic(ctx context.Context, topic string) (*topicInfo, error) {
	return b.resolveTopic(ctx, topic, false)
}

func (b *Bus) resolveTopic(ctx context.Context, topic string, create bool) (*topicInfo, error) {
	b.topicsMu.Lock()
	ti := b.topics[topic]
	b.topicsMu.Unlock()
	if ti != nil {
		return ti, nil
	}
	if err := facade.ValidateTopic(topic); err != nil {
		return nil, err
	}
	key := topic
	if create {
		key += " create"
	}
	// One lookup per topic at a time, on a context of its own (its
	// values, the principal among them, are the first caller's): a
	// caller that gives up does not fail the others waiting.
	ch := b.topicFlight.DoChan(key, func() (any, error) {
		ctx, cancel := b.withTimeout(context.WithoutCancel(ctx))
		defer cancel()
		ti, err := b.lookupTopic(ctx, topic, create)
		if err != nil {
			return nil, err
		}
		return b.cacheTopic(ti), nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*topicInfo), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: topic %s: %w", facade.ErrUnavailable, topic, ctx.Err())
	}
}

// cacheTopic keeps ti unless another goroutine cached the topic first, and
// returns the one kept.
func (b *Bus) cacheTopic(ti *topicInfo) *topicInfo {
	b.topicsMu.Lock()
	defer b.topicsMu.Unlock()
	if cur := b.topics[ti.topic]; cur != nil {
		return cur
	}
	b.topics[ti.topic] = ti
	return ti
}

// forgetTopic drops a cached topic, after its stream went away.
func (b *Bus) forgetTopic(topic string) {
	b.topicsMu.Lock()
	delete(b.topics, topic)
	b.topicsMu.Unlock()
}

// lookupTopic finds the stream that captures topic and, when create is set
// and there is none, creates it.
func (b *Bus) lookupTopic(ctx context.Context, topic string, create bool) (*topicInfo, error) {
	name, err := b.js.StreamNameBySubject(ctx, topic)
	switch {
	case err == nil:
		return b.streamTopic(ctx, topic, name)
	case errors.Is(err, jetstream.ErrStreamNotFound) && !create:
		return nil, fmt.Errorf("%w: topic %s does not exist (no stream captures it)", facade.ErrNotFound, topic)
	case errors.Is(err, jetstream.ErrStreamNotFound):
	default:
		return nil, fmt.Errorf("%w: find stream of %s: %w", facade.ErrUnavailable, topic, err)
	}
	tc := b.cfg.topicConfig(topic)
	sc := b.cfg.streamConfig(topic, tc)
	if tc.Stream != "" {
		// A family stream: create it or add nothing to an existing one.
		s, err := b.js.CreateOrUpdateStream(ctx, sc)
		if err != nil {
			return nil, fmt.Errorf("create stream %s for %s: %w", sc.Name, topic, translate(err))
		}
		return b.topicFromStream(ctx, topic, s)
	}
	undo, err := b.guardTopic(ctx, topic, &sc)
	if err != nil {
		return nil, err
	}
	s, err := b.js.CreateStream(ctx, sc)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		undo() // another member made it: this creation counts for nothing
		s, err = b.streamJustCreated(ctx, sc.Name)
	} else if err != nil {
		undo()
	}
	if err != nil {
		return nil, fmt.Errorf("create stream %s for %s: %w", sc.Name, topic, translate(err))
	}
	b.log.Info("stream created", "stream", sc.Name, "topic", topic, "storage", sc.Storage.String(),
		"max_age", sc.MaxAge, "compaction", tc.Compaction, "replicas", sc.Replicas)
	return b.topicFromStream(ctx, topic, s)
}

// guardTopic asks the Guard, if any, before the bus creates sc, the own
// stream of topic: the creation counts against the quota of the principal
// ctx carries. undo gives the count back when the stream is not created
// after all.
func (b *Bus) guardTopic(ctx context.Context, topic string, sc *jetstream.StreamConfig) (undo func(), err error) {
	g := b.cfg.Guard
	if g == nil {
		return func() {}, nil
	}
	if undo, err = g.CreateTopic(ctx, topic); err != nil {
		return nil, err
	}
	// A creator id makes this creation's config unique: JetStream answers
	// a create with an identical config as success, so a hub that lost the
	// race would count the topic as its creation too.
	sc.Metadata = map[string]string{"eventhub_creator": facade.NewID()}
	return undo, nil
}

// streamJustCreated looks up a stream that another hub may have created a
// moment ago: on a cluster the node this hub talks to can answer "not
// found" until the stream's creation has reached it, so it asks again, for
// up to a second.
func (b *Bus) streamJustCreated(ctx context.Context, name string) (jetstream.Stream, error) {
	wait := 20 * time.Millisecond
	deadline := time.Now().Add(time.Second)
	for {
		s, err := b.js.Stream(ctx, name)
		if !errors.Is(err, jetstream.ErrStreamNotFound) || time.Now().Add(wait).After(deadline) {
			return s, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func (b *Bus) streamTopic(ctx context.Context, topic, name string) (*topicInfo, error) {
	// The name came from a lookup by subject; its info may lag on this
	// node when another hub just created the stream.
	s, err := b.streamJustCreated(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, name, err)
	}
	return b.topicFromStream(ctx, topic, s)
}

func (b *Bus) topicFromStream(ctx context.Context, topic string, s jetstream.Stream) (*topicInfo, error) {
	info := s.CachedInfo()
	if c := b.catalogue.Load(); c != nil {
		c.noteStream(info)
	}
	ti := &topicInfo{
		topic:     topic,
		stream:    s,
		name:      info.Config.Name,
		compacted: info.Config.MaxMsgsPerSubject == 1,
		filters:   []string{topic},
		obs:       b.cfg.Observer.Topic(topic),
	}
	keyedName, err := b.js.StreamNameBySubject(ctx, keyedPrefix(topic)+"x")
	if err == nil && keyedName == ti.name {
		ti.keyed = true
		ti.filters = append(ti.filters, keyedWildcard(topic))
	}
	// A stream is ours alone when its subjects are exactly the topic's.
	subs := info.Config.Subjects
	ti.shared = !(len(subs) == 2 && subs[0] == topic && subs[1] == keyedWildcard(topic))
	return ti, nil
}

// Provision creates the streams of configured topics now instead of on first
// use: every topic pattern without wildcards, and every family stream. Then
// plain NATS clients can publish to those topics before the hub has touched
// them. Streams that exist already are left as they are, but for one thing:
// a topic the configuration declares compacted whose stream (created
// earlier, by a read or a publish before the declaration) keeps every
// event. The hub's own stream of the topic is made compacted (it keeps the
// newest event per key from then on); an operator's stream is not touched,
// and Provision fails with the command that would do it.
func (b *Bus) Provision(ctx context.Context) error {
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	for _, tc := range b.cfg.Topics {
		switch {
		case tc.Stream != "":
			if _, err := b.js.Stream(ctx, tc.Stream); err == nil {
				continue
			}
			if _, err := b.js.CreateStream(ctx, b.cfg.streamConfig(tc.Pattern, tc)); err != nil &&
				!errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				return fmt.Errorf("provision stream %s: %w", tc.Stream, translate(err))
			}
		case !strings.ContainsAny(tc.Pattern, "*>"):
			ti, err := b.topic(ctx, tc.Pattern)
			if err != nil {
				return fmt.Errorf("provision %s: %w", tc.Pattern, err)
			}
			if tc.Compaction && !ti.compacted {
				if err := b.compact(ctx, ti); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ttlAllowed reports whether ti's stream takes per-message TTLs, as the
// hub last read its configuration.
func ttlAllowed(ti *topicInfo) bool {
	info := ti.stream.CachedInfo()
	return info != nil && info.Config.AllowMsgTTL
}

// allowTTL turns per-message TTLs on for ti's stream, when the hub made it
// (the topic's own stream, or the configured stream of its family), and
// returns the topic as it stands then. The hub makes its streams without
// them, because a stream that allows them costs the server on every
// publish (about a tenth of an asynchronous publish's rate, 2 cores), and
// turns them on with the first publish that asks for a TTL. A stream made
// outside the hub is left as it is: JetStream refuses the publish
// (ErrInvalidOption).
func (b *Bus) allowTTL(ctx context.Context, ti *topicInfo) (*topicInfo, error) {
	if !ti.own() && b.cfg.topicConfig(ti.topic).Stream != ti.name {
		return ti, nil
	}
	info, err := ti.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ti.name, translate(err))
	}
	if !info.Config.AllowMsgTTL {
		sc := info.Config
		sc.AllowMsgTTL = true
		if _, err := b.js.UpdateStream(ctx, sc); err != nil {
			return nil, fmt.Errorf("allow message TTLs on stream %s of %s: %w", ti.name, ti.topic, translate(err))
		}
		b.log.Info("stream takes per-message TTLs from now on (its first publish with a TTL)", "stream", ti.name, "topic", ti.topic)
	}
	b.forgetTopic(ti.topic)
	return b.topic(ctx, ti.topic)
}

// compact makes the stream of a topic declared compacted keep one event per
// subject, if it is the hub's own stream of that topic.
func (b *Bus) compact(ctx context.Context, ti *topicInfo) error {
	if !ti.own() {
		return fmt.Errorf("%w: topic %s is configured with compaction, but stream %s keeps every event and is not the hub's own; "+
			"to compact it run: nats stream edit %s --max-msgs-per-subject 1", facade.ErrNotCompacted, ti.topic, ti.name, ti.name)
	}
	s, err := b.streamJustCreated(ctx, ti.name)
	if err != nil {
		return fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, ti.name, err)
	}
	sc := s.CachedInfo().Config
	sc.MaxMsgsPerSubject = 1
	if _, err := b.js.UpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("compact stream %s of %s: %w", ti.name, ti.topic, translate(err))
	}
	b.forgetTopic(ti.topic)
	b.log.Warn("stream made compacted, as configured: it keeps the newest event per key from now on",
		"stream", ti.name, "topic", ti.topic)
	return nil
}

// CreateTopic creates the stream of topic now, as its first publish through
// the hub would (its own stream, or the configured family stream), so that
// native NATS clients can publish to it with acknowledgements; a stream
// that already captures the topic is left as it is. It returns the
// stream's name. Errors: facade.ErrBadTopic for an invalid topic or a
// pattern (a family is declared in the configuration instead), and the
// JetStream error of the create. It blocks on JetStream API calls.
func (b *Bus) CreateTopic(ctx context.Context, topic string) (string, error) {
	if strings.ContainsAny(topic, "*>") {
		return "", fmt.Errorf("%w: %q is a pattern; declare a topic family with a stream in the configuration (topics: - pattern: %s, stream: NAME)",
			facade.ErrBadTopic, topic, topic)
	}
	ti, err := b.topic(ctx, topic)
	if err != nil {
		return "", err
	}
	return ti.name, nil
}

// patternTopic resolves a subscription pattern ("orders.*", "orders.**")
// to the one stream that holds every topic it matches, a topic family:
// the group's consumer filters that stream on the pattern. With create, a
// configured family stream that captures the pattern is created when it
// does not exist yet. A pattern whose topics live in separate streams, or
// in none, is refused with facade.ErrBadTopic saying how to declare a
// family.
func (b *Bus) patternTopic(ctx context.Context, pat string, create bool) (*topicInfo, error) {
	if err := facade.ValidatePattern(pat); err != nil {
		return nil, err
	}
	m, err := pattern.Compile(pat)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", facade.ErrBadTopic, err)
	}
	subj, ok := m.NATSSubject()
	if !ok {
		return nil, fmt.Errorf(`%w: pattern %q: "**" may only be the last segment of a subscription (NATS subjects cannot express it elsewhere); use "*" for exactly one segment`, facade.ErrBadTopic, pat)
	}
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	var names []string
	l := b.js.StreamNames(ctx, jetstream.WithStreamListSubject(subj))
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("%w: find streams of %s: %w", facade.ErrUnavailable, pat, err)
	}
	var s jetstream.Stream
	switch len(names) {
	case 0:
		tc, ok := b.cfg.familyOf(subj)
		if ok && !create {
			return nil, fmt.Errorf("%w: %s: the stream %s of its family does not exist yet", facade.ErrNotFound, pat, tc.Stream)
		}
		if !ok {
			return nil, fmt.Errorf("%w: no stream holds the topics of %s yet, and no topic family of the configuration captures them; %s",
				facade.ErrBadTopic, pat, declareFamilyHint(pat))
		}
		sc := b.cfg.streamConfig(tc.Pattern, tc)
		s, err = b.js.CreateOrUpdateStream(ctx, sc)
		if err != nil {
			return nil, fmt.Errorf("create stream %s for %s: %w", sc.Name, pat, translate(err))
		}
	case 1:
		s, err = b.js.Stream(ctx, names[0])
		if err != nil {
			return nil, fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, names[0], err)
		}
		if !captures(s.CachedInfo().Config.Subjects, subj) {
			return nil, fmt.Errorf("%w: the topics of %s are not one topic family: stream %s holds only some of them; %s",
				facade.ErrBadTopic, pat, names[0], declareFamilyHint(pat))
		}
	default:
		slices.Sort(names)
		list := strings.Join(names[:min(len(names), 5)], ", ")
		if len(names) > 5 {
			list += fmt.Sprintf(" and %d more", len(names)-5)
		}
		return nil, fmt.Errorf("%w: the topics of %s live in separate streams (%s), and a group reads a pat only over a topic family, topics that share one stream; %s",
			facade.ErrBadTopic, pat, list, declareFamilyHint(pat))
	}
	info := s.CachedInfo()
	filters := []string{subj}
	if kw := keyedWildcard(subj); !strings.HasSuffix(subj, ">") && captures(info.Config.Subjects, kw) {
		filters = append(filters, kw)
	}
	dlq := strings.HasSuffix(pat, "."+facade.DeadLetterSuffix)
	return &topicInfo{
		topic:     pat,
		stream:    s,
		name:      info.Config.Name,
		keyed:     len(filters) > 1 || strings.HasSuffix(subj, ">"),
		compacted: info.Config.MaxMsgsPerSubject == 1,
		shared:    true,
		filters:   filters,
		obs:       b.cfg.Observer.Topic(pat),
		match: func(topic string) bool {
			return m.Match(topic) && (dlq || !strings.HasSuffix(topic, "."+facade.DeadLetterSuffix))
		},
	}, nil
}

// groupTopic is resolveTopic for what a group reads, which may be a
// pattern (subscriptions, cursors).
func (b *Bus) groupTopic(ctx context.Context, topic string, create bool) (*topicInfo, error) {
	if pattern.HasWildcard(topic) {
		return b.patternTopic(ctx, topic, create)
	}
	return b.resolveTopic(ctx, topic, create)
}

// captures reports whether the stream subjects capture every subject of
// the filter subj.
func captures(subjects []string, subj string) bool {
	for _, s := range subjects {
		if server.SubjectMatchesFilter(subj, s) {
			return true
		}
	}
	return false
}

// familyOf returns the configured topic family whose stream captures every
// subject of subj.
func (c Config) familyOf(subj string) (TopicConfig, bool) {
	for _, tc := range c.Topics {
		if tc.Stream != "" && server.SubjectMatchesFilter(subj, tc.Pattern) {
			return tc, true
		}
	}
	return TopicConfig{}, false
}

// declareFamilyHint says how to declare the family a pattern reads.
func declareFamilyHint(pattern string) string {
	fam := pattern
	if strings.HasSuffix(fam, ".*") || fam == "*" {
		fam += "*"
	}
	return fmt.Sprintf("declare a family in the configuration (topics: [{pattern: %q, stream: NAME}]), or list the topics (SubscribeOptions.Topics)", fam)
}
