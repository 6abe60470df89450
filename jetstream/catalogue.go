package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats-server/v2/server/gsl"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// JetStream's advisories of stream and consumer changes: the last tokens
// of their subjects name the stream (and the consumer).
const (
	advisoryStream   = "$JS.EVENT.ADVISORY.STREAM."
	advisoryConsumer = "$JS.EVENT.ADVISORY.CONSUMER."
)

// catalogueRetry is how long the catalogue waits before reading again
// after a read failed; it reads a stream or consumer announced as created
// but not found yet (JetStream can announce one before it answers for it)
// up to catalogueTries times.
const (
	catalogueRetry = 250 * time.Millisecond
	catalogueTries = 40
)

// errNotYet: a stream or consumer announced as created is not found yet.
var errNotYet = errors.New("announced but not found yet")

// errCatalogueNotLoaded: the streams were never listed.
var errCatalogueNotLoaded = errors.New("the stream catalogue is not loaded yet")

// Catalogue is the bus's streams in memory, with their subjects and
// groups, as [Bus.TopicStreams] lists them: looking one up costs no
// JetStream API call. It lists every stream once when made and again
// after each reconnect, and in between follows JetStream's advisories of
// streams created, updated and deleted and of consumers created and
// deleted, asking JetStream only about the stream or consumer that
// changed. The streams and groups the bus makes are in it when the call
// that made them returns; a change made outside the bus (the nats CLI) is
// seen once its advisory has arrived and the stream or consumer has been
// read, moments after JetStream answered the call that made it. Close
// stops it.
type Catalogue struct {
	b    *Bus
	subs []*nats.Subscription
	// status reports the connection's reconnects.
	status chan nats.Status
	kick   chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	streams map[string]*catStream
	// snap is what lookups read: made again after each change.
	snap atomic.Pointer[catalogueSnapshot]

	pmu  sync.Mutex
	full bool // list every stream again
	// pending holds the streams ("stream") and consumers
	// ("stream.consumer") to read again, true for those announced as
	// created or updated.
	pending map[string]bool
	tries   map[string]int // reads of those announced but not found yet
}

// catStream is a stream as the catalogue keeps it.
type catStream struct {
	subjects  []string
	consumers map[string]catConsumer
}

// catalogueSnapshot is the catalogue at one moment, indexed so that a
// lookup by a literal subject costs no walk over the streams.
type catalogueSnapshot struct {
	streams []TopicStream // by name, with their groups
	// literal holds the streams of each literal subject; wild the
	// wildcard subjects (a topic's keyed subjects, families), with their
	// streams.
	literal map[string][]int
	wild    *gsl.GenericSublist[int]
}

func newSnapshot(streams map[string]*catStream) *catalogueSnapshot {
	sn := &catalogueSnapshot{literal: map[string][]int{}, wild: gsl.NewSublist[int]()}
	for name, st := range streams {
		ts := TopicStream{Name: name, Subjects: slices.Clone(st.subjects), Topic: ownTopic(st.subjects)}
		for cn, cc := range st.consumers {
			if g, ok := catalogueGroup(ts.Topic, cn, cc); ok {
				ts.Groups = append(ts.Groups, g)
			}
		}
		slices.SortFunc(ts.Groups, func(a, b GroupConsumer) int { return strings.Compare(a.Consumer, b.Consumer) })
		sn.streams = append(sn.streams, ts)
	}
	slices.SortFunc(sn.streams, func(a, b TopicStream) int { return strings.Compare(a.Name, b.Name) })
	for i, ts := range sn.streams {
		for _, subj := range ts.Subjects {
			if !server.IsValidLiteralSubject(subj) {
				_ = sn.wild.Insert(subj, i)
			} else {
				sn.literal[subj] = append(sn.literal[subj], i)
			}
		}
	}
	return sn
}

// lookup returns the streams whose subjects overlap filter: for a literal
// filter from the indexes, for a wildcard one by a walk.
func (sn *catalogueSnapshot) lookup(filter string, groups bool) []TopicStream {
	var idx []int
	if !server.IsValidLiteralSubject(filter) {
		for i, ts := range sn.streams {
			if slices.ContainsFunc(ts.Subjects, func(s string) bool { return server.SubjectsCollide(s, filter) }) {
				idx = append(idx, i)
			}
		}
	} else {
		idx = slices.Clone(sn.literal[filter])
		sn.wild.Match(filter, func(i int) { idx = append(idx, i) })
		slices.Sort(idx)
		idx = slices.Compact(idx)
	}
	out := make([]TopicStream, 0, len(idx))
	for _, i := range idx {
		ts := sn.streams[i]
		ts.Subjects = slices.Clone(ts.Subjects)
		if groups {
			ts.Groups = slices.Clone(ts.Groups)
		} else {
			ts.Groups = nil
		}
		out = append(out, ts)
	}
	return out
}

// catConsumer is what TopicStream.Groups needs of a consumer.
type catConsumer struct {
	pull  bool // a pull consumer with acks
	group string
	topic string
}

// grouping reports whether the consumer can hold a group (see
// catalogueGroup): the catalogue keeps no others, such as the ordered
// consumers of live sessions and replays.
func (c catConsumer) grouping() bool { return c.pull || (c.group != "" && c.topic != "") }

func consumerOf(cfg jetstream.ConsumerConfig) catConsumer {
	return catConsumer{
		pull:  cfg.AckPolicy != jetstream.AckNonePolicy && cfg.DeliverSubject == "",
		group: cfg.Metadata[metaGroup],
		topic: cfg.Metadata[metaTopic],
	}
}

// catalogueGroup returns the group that consumer name holds on a stream whose own
// topic is topic ("" for a shared stream), if it holds one: on a topic's
// own stream every pull consumer with acks, the hub's groups and those
// made outside the hub (ordered consumers and replays ack nothing; a push
// consumer is its deliver subject's, not a group to join); on a shared
// stream the hub's groups, which carry their group and topic as metadata.
func catalogueGroup(topic, name string, c catConsumer) (GroupConsumer, bool) {
	switch {
	case topic != "" && c.pull:
		return GroupConsumer{Consumer: name, Topic: topic, Group: cmp.Or(c.group, name)}, true
	case topic == "" && c.group != "" && c.topic != "":
		return GroupConsumer{Consumer: name, Topic: c.topic, Group: c.group}, true
	}
	return GroupConsumer{}, false
}

// ownTopic returns the topic of a stream whose subjects are one topic and
// its keyed subjects, or "".
func ownTopic(subjects []string) string {
	if len(subjects) == 2 && subjects[1] == keyedWildcard(subjects[0]) {
		return subjects[0]
	}
	return ""
}

// WatchCatalogue lists the bus's streams and keeps the list current until
// Close (see Catalogue).
func (b *Bus) WatchCatalogue(ctx context.Context) (*Catalogue, error) {
	c := &Catalogue{
		b: b, kick: make(chan struct{}, 1), done: make(chan struct{}),
		streams: map[string]*catStream{}, pending: map[string]bool{}, tries: map[string]int{},
	}
	for _, subj := range []string{
		advisoryStream + "CREATED.*", advisoryStream + "UPDATED.*", advisoryStream + "DELETED.*",
		advisoryConsumer + "CREATED.*.*", advisoryConsumer + "DELETED.*.*",
	} {
		sub, err := b.nc.Subscribe(subj, c.advisory)
		if err != nil {
			c.unsubscribe()
			return nil, fmt.Errorf("%w: stream catalogue: %w", facade.ErrUnavailable, err)
		}
		c.subs = append(c.subs, sub)
	}
	// Advisories that arrive during the first listing are applied after it.
	if err := b.nc.Flush(); err != nil {
		c.unsubscribe()
		return nil, fmt.Errorf("%w: stream catalogue: %w", facade.ErrUnavailable, err)
	}
	if err := c.listAll(ctx); err != nil {
		c.unsubscribe()
		return nil, err
	}
	c.status = b.nc.StatusChanged(nats.CONNECTED)
	c.wg.Go(c.run)
	b.catalogue.Store(c)
	return c, nil
}

// Close stops following the changes; lookups answer from the last state.
// Closing twice, or a nil Catalogue, is not an error.
func (c *Catalogue) Close() {
	if c == nil {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	close(c.done)
	c.b.catalogue.CompareAndSwap(c, nil)
	c.unsubscribe()
	c.b.nc.RemoveStatusListener(c.status)
	c.wg.Wait()
}

func (c *Catalogue) unsubscribe() {
	for _, s := range c.subs {
		_ = s.Unsubscribe()
	}
}

// advisory marks the stream or consumer an advisory names, to be read
// again: advisories arriving faster than they are read collapse into one
// read each.
func (c *Catalogue) advisory(m *nats.Msg) {
	rest, ok := strings.CutPrefix(m.Subject, advisoryConsumer)
	if !ok {
		rest, _ = strings.CutPrefix(m.Subject, advisoryStream)
	}
	// CREATED.<stream>[.<consumer>]
	if action, key, _ := strings.Cut(rest, "."); key != "" {
		c.mark(key, action != "DELETED")
	}
}

func (c *Catalogue) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run reads what changed, one change at a time: a change read later
// always reads the newer state.
func (c *Catalogue) run() {
	var retry <-chan time.Time
	for {
		select {
		case <-c.done:
			return
		case <-c.status:
			// Advisories sent while disconnected are lost: list again.
			c.pmu.Lock()
			c.full = true
			c.pmu.Unlock()
		case <-c.kick:
		case <-retry:
			retry = nil
		}
		if !c.apply() && retry == nil {
			retry = time.After(catalogueRetry)
		}
	}
}

// apply reads what is pending; it reports false when a read failed (what
// failed stays pending).
func (c *Catalogue) apply() bool {
	c.pmu.Lock()
	full, pending := c.full, c.pending
	c.full, c.pending = false, map[string]bool{}
	c.pmu.Unlock()
	ctx, cancel := c.b.withTimeout(context.Background())
	defer cancel()
	failed := map[string]bool{}
	if full {
		if err := c.listAll(ctx); err != nil {
			c.b.log.Warn("stream catalogue: listing failed; lookups answer from the last listing", "err", err)
			c.pmu.Lock()
			c.full = true
			keepOlder(c.pending, pending)
			c.pmu.Unlock()
			return false
		}
	}
	keys := make([]string, 0, len(pending))
	for k := range pending {
		keys = append(keys, k)
	}
	// A stream is read before its consumers.
	slices.Sort(keys)
	for _, k := range keys {
		stream, consumer, isConsumer := strings.Cut(k, ".")
		exists := pending[k] && c.tries[k] < catalogueTries
		var err error
		if isConsumer {
			err = c.readConsumer(ctx, stream, consumer, exists)
		} else {
			err = c.readStream(ctx, stream, exists)
		}
		switch {
		case errors.Is(err, errNotYet):
			c.tries[k]++
			failed[k] = true
		case err != nil:
			c.b.log.Warn("stream catalogue: read failed", "stream", stream, "consumer", consumer, "err", err)
			failed[k] = pending[k]
		default:
			delete(c.tries, k)
		}
	}
	if len(failed) == 0 {
		return true
	}
	c.pmu.Lock()
	keepOlder(c.pending, failed)
	c.pmu.Unlock()
	return false
}

// keepOlder puts back into pending what was taken from it and is to be
// read again, unless it was marked again since.
func keepOlder(pending, taken map[string]bool) {
	for k, v := range taken {
		if _, marked := pending[k]; !marked {
			pending[k] = v
		}
	}
}

// listAll lists every stream and its consumers, and replaces the
// catalogue with them.
func (c *Catalogue) listAll(ctx context.Context) error {
	ctx, cancel := c.b.withTimeout(ctx)
	defer cancel()
	all := map[string]*catStream{}
	l := c.b.js.ListStreams(ctx)
	for info := range l.Info() {
		st := &catStream{subjects: slices.Clone(info.Config.Subjects)}
		if err := c.listConsumers(ctx, info.Config.Name, st); err != nil {
			return err
		}
		all[info.Config.Name] = st
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("%w: list streams: %w", facade.ErrUnavailable, translate(err))
	}
	c.mu.Lock()
	c.streams = all
	c.publish()
	c.mu.Unlock()
	return nil
}

// publish makes the snapshot lookups read from the streams; c.mu held.
func (c *Catalogue) publish() { c.snap.Store(newSnapshot(c.streams)) }

func (c *Catalogue) listConsumers(ctx context.Context, stream string, st *catStream) error {
	st.consumers = map[string]catConsumer{}
	s, err := c.b.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, stream, translate(err))
	}
	l := s.ListConsumers(ctx)
	for ci := range l.Info() {
		if cc := consumerOf(ci.Config); cc.grouping() {
			st.consumers[ci.Name] = cc
		}
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("%w: consumers of %s: %w", facade.ErrUnavailable, stream, translate(err))
	}
	return nil
}

// readStream reads one stream again, with its consumers; a stream that no
// longer exists leaves the catalogue, unless exists says it was announced
// (errNotYet).
func (c *Catalogue) readStream(ctx context.Context, name string, exists bool) error {
	s, err := c.b.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) && exists {
		return errNotYet
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		c.mu.Lock()
		if _, ok := c.streams[name]; ok {
			delete(c.streams, name)
			c.publish()
		}
		c.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: stream %s: %w", facade.ErrUnavailable, name, translate(err))
	}
	st := &catStream{subjects: slices.Clone(s.CachedInfo().Config.Subjects)}
	if err := c.listConsumers(ctx, name, st); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return c.readStream(ctx, name, exists)
		}
		return err
	}
	c.mu.Lock()
	c.streams[name] = st
	c.publish()
	c.mu.Unlock()
	return nil
}

// readConsumer reads one consumer again; one that no longer exists leaves
// the catalogue, unless exists says it was announced (errNotYet).
func (c *Catalogue) readConsumer(ctx context.Context, stream, name string, exists bool) error {
	c.mu.Lock()
	_, known := c.streams[stream]
	c.mu.Unlock()
	if !known {
		return c.readStream(ctx, stream, exists)
	}
	cons, err := c.b.js.Consumer(ctx, stream, name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound) && exists:
		return errNotYet
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		c.setConsumer(stream, name, catConsumer{})
		return nil
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return c.readStream(ctx, stream, exists)
	case err != nil:
		return fmt.Errorf("%w: consumer %s of %s: %w", facade.ErrUnavailable, name, stream, translate(err))
	}
	c.setConsumer(stream, name, consumerOf(cons.CachedInfo().Config))
	return nil
}

// setConsumer records consumer name of stream, or forgets it when it holds
// no group; it reports whether the stream is known.
func (c *Catalogue) setConsumer(stream, name string, cc catConsumer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.streams[stream]
	if st == nil {
		return false
	}
	old, had := st.consumers[name]
	switch {
	case cc.grouping() && (!had || old != cc):
		st.consumers[name] = cc
	case !cc.grouping() && had:
		delete(st.consumers, name)
	default:
		return true // nothing changed
	}
	c.publish()
	return true
}

// noteStream records a stream the bus made or found, as JetStream
// answered it: what the bus made is in the catalogue before the call that
// made it returns, not only once its advisory has arrived. A stream new to
// the catalogue is read again, with its consumers.
func (c *Catalogue) noteStream(info *jetstream.StreamInfo) {
	name := info.Config.Name
	c.mu.Lock()
	st := c.streams[name]
	known := st != nil
	switch {
	case !known:
		c.streams[name] = &catStream{subjects: slices.Clone(info.Config.Subjects), consumers: map[string]catConsumer{}}
		c.publish()
	case !slices.Equal(st.subjects, info.Config.Subjects):
		st.subjects = slices.Clone(info.Config.Subjects)
		c.publish()
	}
	c.mu.Unlock()
	if !known {
		c.mark(name, true)
	}
}

// noteConsumer records a group's consumer the bus made or found (see
// noteStream).
func (c *Catalogue) noteConsumer(stream string, info *jetstream.ConsumerInfo) {
	if !c.setConsumer(stream, info.Name, consumerOf(info.Config)) {
		c.mark(stream, true)
	}
}

// forgetStream removes a stream the bus deleted.
func (c *Catalogue) forgetStream(name string) {
	c.mu.Lock()
	delete(c.streams, name)
	c.publish()
	c.mu.Unlock()
}

// mark has key read again; exists: it was announced as created or updated.
func (c *Catalogue) mark(key string, exists bool) {
	c.pmu.Lock()
	c.pending[key] = exists
	c.pmu.Unlock()
	c.wake()
}

// TopicStreams lists, by name, the streams whose subjects overlap filter
// (a NATS subject, wildcards allowed), with groups the groups on each: as
// [Bus.TopicStreams], from memory. A literal filter is looked up in an
// index; a wildcard one walks the streams. It fails only before the first
// listing.
func (c *Catalogue) TopicStreams(_ context.Context, filter string, groups bool) ([]TopicStream, error) {
	sn := c.snap.Load()
	if sn == nil {
		return nil, fmt.Errorf("%w: %w", facade.ErrUnavailable, errCatalogueNotLoaded)
	}
	return sn.lookup(filter, groups), nil
}
