package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// Groups are durable pull consumers with explicit acks. Every group is
// created with DeliverPolicy "all" and then positioned by a consumer reset
// (nats-server 2.14+): a DeliverAll consumer may be reset to any sequence, so
// SetCursor can always rewind or skip it without recreating it. While it is
// being positioned the new consumer is paused, so that a member in another
// process that finds it cannot pull from the wrong place.

// ensureGroup returns the group's consumer, creating it at the position that
// o.From names when it does not exist, and the group's retry policy:
// o.Retry's when it is a new group, else the group's, which o.Retry must
// then equal (else ErrConflictingOption).
func (b *Bus) ensureGroup(ctx context.Context, ti *topicInfo, group string, o facade.SubscribeOptions) (jetstream.Consumer, facade.RetryPolicy, error) {
	cons, err := b.provisionGroup(ctx, ti, group, o)
	if err != nil {
		return nil, facade.RetryPolicy{}, err
	}
	cfg := cons.CachedInfo().Config
	retry, err := b.checkRetry(ti, group, cfg, o.Retry)
	if err != nil {
		return nil, facade.RetryPolicy{}, err
	}
	if err := checkOrder(ti, group, cfg, o.OrderBy); err != nil {
		return nil, facade.RetryPolicy{}, err
	}
	return cons, retry, nil
}

// metaOrder is the consumer metadata key of a group's order
// ([facade.OrderByKey]), set when the member that created the group asked
// for one. Ordered groups are also pinned (see createGroup).
const metaOrder = "eventhub_order"

// groupOrder is the order of the group whose consumer has cfg: "" or
// facade.OrderByKey.
func groupOrder(cfg jetstream.ConsumerConfig) string {
	if cfg.PriorityPolicy != jetstream.PriorityPolicyPinned {
		return ""
	}
	return cfg.Metadata[metaOrder]
}

// checkOrder reports, with ErrConflictingOption, a member that asks for an
// order other than its group's.
func checkOrder(ti *topicInfo, group string, cfg jetstream.ConsumerConfig, want string) error {
	if have := groupOrder(cfg); want != "" && want != have {
		return orderConflict(want, have, group, ti.topic)
	}
	return nil
}

// orderConflict is the error of a member asking for order want of a group
// that has another.
func orderConflict(want, have, group, topic string) error {
	if have == "" {
		have = "none"
	}
	return fmt.Errorf("%w: orderBy %q: group %s of %s has order %s (set when it was created); subscribe without orderBy to follow it, or delete the group to change it",
		facade.ErrConflictingOption, want, group, topic, have)
}

// metaRetry is the consumer metadata key of a group's retry policy (its
// JSON form, defaults applied), set when the member that created the
// group asked for one. A group without it retries with each bus's
// default.
const metaRetry = "eventhub_retry"

// defaultRetry is the retry policy of groups that set none.
func (b *Bus) defaultRetry() facade.RetryPolicy {
	return facade.RetryPolicy{}.WithDefaults(b.cfg.RetryBackoff, b.cfg.MaxRetryBackoff)
}

// groupRetry is the retry policy of the group whose consumer has cfg.
func (b *Bus) groupRetry(cfg jetstream.ConsumerConfig) facade.RetryPolicy {
	raw, ok := cfg.Metadata[metaRetry]
	if !ok {
		return b.defaultRetry()
	}
	var p facade.RetryPolicy
	if err := json.Unmarshal([]byte(raw), &p); err != nil || p.Validate() != nil {
		b.log.Warn("group has an unreadable retry policy; using the default", "consumer", cfg.Durable, "policy", raw)
		return b.defaultRetry()
	}
	return p.WithDefaults(b.cfg.RetryBackoff, b.cfg.MaxRetryBackoff)
}

// checkRetry returns the retry policy of the group whose consumer has
// cfg; ErrConflictingOption when want is set and differs from it.
func (b *Bus) checkRetry(ti *topicInfo, group string, cfg jetstream.ConsumerConfig, want *facade.RetryPolicy) (facade.RetryPolicy, error) {
	have := b.groupRetry(cfg)
	if want == nil {
		return have, nil
	}
	if w := want.WithDefaults(b.cfg.RetryBackoff, b.cfg.MaxRetryBackoff); !w.Equal(have) {
		return facade.RetryPolicy{}, retryConflict(w, have, group, ti.topic)
	}
	return have, nil
}

// retryConflict is the error of a member asking for retry policy want of
// a group that has another.
func retryConflict(want, have facade.RetryPolicy, group, topic string) error {
	return fmt.Errorf("%w: retry %s: group %s of %s retries %s (set when it was created); subscribe without retry to follow it, or delete the group to change it",
		facade.ErrConflictingOption, want, group, topic, have)
}

// provisionGroup is ensureGroup without the retry policy. A watched
// catalogue learns of the group at once.
func (b *Bus) provisionGroup(ctx context.Context, ti *topicInfo, group string, o facade.SubscribeOptions) (cons jetstream.Consumer, err error) {
	defer func() {
		if c := b.catalogue.Load(); c != nil && err == nil {
			c.noteConsumer(ti.name, cons.CachedInfo())
		}
	}()
	ctx, cancel := b.withTimeout(ctx)
	defer cancel()
	name := consumerNameFor(group, ti.topic, ti.shared)
	cons, err = ti.stream.Consumer(ctx, name)
	if err == nil {
		// AckWait and MaxAckPending only grow: lowering AckWait would apply
		// to events other members hold and redeliver them under their
		// leases. A ManualAck member with a shorter ack timeout hands its
		// own expired deliveries back (delivery.expire).
		cfg := cons.CachedInfo().Config
		if cfg.AckWait >= o.AckTimeout() && (cfg.MaxAckPending < 0 || cfg.MaxAckPending >= groupMaxAckPending(o)) {
			return cons, nil
		}
		cfg.AckWait = max(cfg.AckWait, o.AckTimeout())
		if cfg.MaxAckPending >= 0 {
			cfg.MaxAckPending = max(cfg.MaxAckPending, groupMaxAckPending(o))
		}
		cons, err = ti.stream.UpdateConsumer(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("update group %s of %s: %w", group, ti.topic, translate(err))
		}
		return cons, nil
	}
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("group %s of %s: %w", group, ti.topic, translate(err))
	}
	undo, err := b.guardGroup(ctx, ti, group)
	if err != nil {
		return nil, err
	}
	next, err := b.startSeq(ctx, ti, o)
	if err != nil {
		undo()
		return nil, err
	}
	cons, created, err := b.createGroup(ctx, ti, name, group, o, next)
	if !created {
		undo() // failed, or another member made it first
	}
	return cons, err
}

// guardGroup asks the Guard, if any, before the bus creates group's
// consumer on ti: the creation counts against the group quota of the
// principal ctx carries. undo gives the count back when the group is not
// created after all.
func (b *Bus) guardGroup(ctx context.Context, ti *topicInfo, group string) (undo func(), err error) {
	if g := b.cfg.Guard; g != nil {
		return g.CreateGroup(ctx, ti.topic, group)
	}
	return func() {}, nil
}

// groupMaxAckPending is the group's window: MaxInFlight, or
// GroupMaxInFlight when larger (see facade.SubscribeOptions).
func groupMaxAckPending(o facade.SubscribeOptions) int {
	return max(o.MaxInFlight, o.GroupMaxInFlight)
}

// startSeq is the first sequence a new group delivers.
func (b *Bus) startSeq(ctx context.Context, ti *topicInfo, o facade.SubscribeOptions) (uint64, error) {
	switch o.From {
	case facade.FromEarliest:
		return 1, nil
	case facade.FromTS:
		return b.seqAtTime(ctx, ti, time.UnixMilli(o.TS))
	case facade.FromAfterID:
		seq, err := b.resolveID(ctx, ti, o.AfterID)
		if err != nil {
			return 0, err
		}
		return seq + 1, nil
	default: // latest
		return b.tailSeq(ctx, ti)
	}
}

// tailSeq is the sequence the next stored message will get.
func (b *Bus) tailSeq(ctx context.Context, ti *topicInfo) (uint64, error) {
	info, err := ti.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", ti.name, translate(err))
	}
	return info.State.LastSeq + 1, nil
}

// createGroup creates the durable consumer of group, positioned at next;
// created is whether this call made it (it then exists even if positioning
// it failed), false when another member made it first.
func (b *Bus) createGroup(ctx context.Context, ti *topicInfo, name, group string, o facade.SubscribeOptions, next uint64) (cons jetstream.Consumer, created bool, err error) {
	creator := facade.NewID()
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "eventhub group " + group + " of " + ti.topic,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckTimeout(),
		// The bus itself enforces MaxAttempts, so that the event is copied to
		// the dead-letter topic before the group lets go of it.
		MaxDeliver:    -1,
		MaxAckPending: groupMaxAckPending(o),
		// A creator id makes every creator's config unique: JetStream treats a
		// create with an identical config as success, so without it a member
		// that lost the race would think it made the group and move it.
		Metadata: map[string]string{"eventhub_group": group, "eventhub_topic": ti.topic, "eventhub_creator": creator},
	}
	if o.Retry != nil {
		raw, err := json.Marshal(o.Retry.WithDefaults(b.cfg.RetryBackoff, b.cfg.MaxRetryBackoff))
		if err != nil {
			return nil, false, fmt.Errorf("create group %s of %s: retry: %w", group, ti.topic, err)
		}
		cfg.Metadata[metaRetry] = string(raw)
	}
	if o.OrderBy == facade.OrderByKey {
		// One member in the cluster pulls at a time (see keyOrder): the
		// others stand by and take over when it stops pulling for
		// PinnedTTL.
		cfg.Metadata[metaOrder] = o.OrderBy
		cfg.PriorityPolicy = jetstream.PriorityPolicyPinned
		cfg.PriorityGroups = []string{priorityGroup}
		cfg.PinnedTTL = b.pinnedTTL()
	}
	switch {
	case !ti.shared:
		// The stream holds the topic's subjects only: no filter, which
		// spares the server matching every message it delivers against
		// the topic's two subjects.
	case len(ti.filters) == 1:
		cfg.FilterSubject = ti.filters[0]
	default:
		cfg.FilterSubjects = ti.filters
	}
	cfg.InactiveThreshold = time.Duration(o.InactiveTimeoutMs) * time.Millisecond
	if next > 1 {
		until := time.Now().Add(30 * time.Second)
		cfg.PauseUntil = &until
	}
	cons, err = ti.stream.CreateConsumer(ctx, cfg)
	created = err == nil && cons.CachedInfo().Config.Metadata["eventhub_creator"] == creator
	if errors.Is(err, jetstream.ErrConsumerExists) {
		// Another member created it first; its position stands (resetting
		// it again would skip or replay what that member already pulled).
		cons, err = ti.stream.Consumer(ctx, name)
	}
	if err != nil {
		return nil, false, fmt.Errorf("create group %s of %s: %w", group, ti.topic, translate(err))
	}
	if !created {
		return cons, false, nil
	}
	if next > 1 {
		if _, err := ti.stream.ResetConsumerToSequence(ctx, name, next); err != nil {
			return nil, true, fmt.Errorf("position group %s of %s at %d: %w", group, ti.topic, next, translate(err))
		}
		if _, err := b.js.ResumeConsumer(ctx, ti.name, name); err != nil {
			return nil, true, fmt.Errorf("resume group %s of %s: %w", group, ti.topic, translate(err))
		}
		cons, err = ti.stream.Consumer(ctx, name)
		if err != nil {
			return nil, true, translate(err)
		}
	}
	b.log.Info("group created", "topic", ti.topic, "group", group, "consumer", name, "stream", ti.name, "start_seq", next)
	return cons, true, nil
}

// seqAtTime returns the sequence of the topic's first event stored at or after
// t, or the tail sequence when there is none.
func (b *Bus) seqAtTime(ctx context.Context, ti *topicInfo, t time.Time) (uint64, error) {
	best := uint64(0)
	for _, f := range ti.filters {
		seq, err := b.msgGet(ctx, ti.name, msgGetRequest{StartTime: &t, NextFor: f})
		if errors.Is(err, errNoMessage) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if best == 0 || seq < best {
			best = seq
		}
	}
	if best == 0 {
		return b.tailSeq(ctx, ti)
	}
	return best, nil
}

type msgGetRequest struct {
	Seq       uint64     `json:"seq,omitempty"`
	NextFor   string     `json:"next_by_subj,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
}

var errNoMessage = errors.New("no message found")

// msgGet asks the stream for one message's sequence; nats.go has no call for
// the start_time form of the request.
func (b *Bus) msgGet(ctx context.Context, stream string, req msgGetRequest) (uint64, error) {
	body, _ := json.Marshal(req)
	resp, err := b.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, body)
	if err != nil {
		return 0, fmt.Errorf("stream %s: message lookup: %w", stream, translate(err))
	}
	var r struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
		Error *struct {
			Code    int    `json:"code"`
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return 0, fmt.Errorf("stream %s: message lookup: %w", stream, err)
	}
	if r.Error != nil {
		if r.Error.Code == 404 {
			return 0, errNoMessage
		}
		return 0, fmt.Errorf("stream %s: message lookup: %s (%d)", stream, r.Error.Desc, r.Error.ErrCode)
	}
	if r.Message == nil {
		return 0, errNoMessage
	}
	return r.Message.Seq, nil
}

// resolveID finds the stream sequence of event id without reading the stream
// from the start: a position id (PosID) or a synthesised id names its
// sequence, which one read confirms; a uuidv7 names its time, and the
// search reads only the events stored within Config.IDSkew of it, matching
// the id each has as fromMsg reads it.
func (b *Bus) resolveID(ctx context.Context, ti *topicInfo, id string) (uint64, error) {
	if seq, ok := synthSeq(id); ok {
		if raw, err := ti.stream.GetMsg(ctx, seq); err == nil {
			if msgID(raw.Header) == "" && synthID(raw.Time, raw.Sequence) == id {
				return seq, nil
			}
		}
	}
	derived := false
	if seq, ok := posSeq(id); ok {
		derived = true
		if raw, err := ti.stream.GetMsg(ctx, seq); err == nil {
			if idOf(raw.Subject, raw.Header, raw.Sequence, raw.Time) == id {
				return seq, nil
			}
		}
	}
	t, ok := facade.IDTime(id)
	if !ok {
		return 0, fmt.Errorf("%w: %q is not a uuidv7, so it cannot be located by time", facade.ErrUnknownID, id)
	}
	from, err := b.seqAtTime(ctx, ti, t.Add(-b.cfg.IDSkew))
	if err != nil {
		return 0, err
	}
	oc, done, err := b.headerScan(ctx, ti, from)
	if err != nil {
		return 0, fmt.Errorf("locate %s: %w", id, err)
	}
	defer done()
	limit := t.Add(b.cfg.IDSkew)
	for {
		batch, err := oc.FetchNoWait(512)
		if err != nil {
			return 0, fmt.Errorf("locate %s: %w", id, translate(err))
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			if msgID(msg.Headers()) == id ||
				derived && idOf(msg.Subject(), msg.Headers(), meta.Sequence.Stream, meta.Timestamp) == id {
				return meta.Sequence.Stream, nil
			}
			if meta.Timestamp.After(limit) || meta.NumPending == 0 {
				return 0, fmt.Errorf("%w: %s not in %s", facade.ErrUnknownID, id, ti.topic)
			}
		}
		if batch.Error() != nil {
			return 0, fmt.Errorf("locate %s: %w", id, translate(batch.Error()))
		}
		if n == 0 {
			return 0, fmt.Errorf("%w: %s not in %s", facade.ErrUnknownID, id, ti.topic)
		}
	}
}

// headerScan makes one ephemeral headers-only consumer of ti's events
// from sequence from on; done deletes it. (An ordered consumer would make
// a new server-side consumer per fetch and leave the last one behind.)
func (b *Bus) headerScan(ctx context.Context, ti *topicInfo, from uint64) (oc jetstream.Consumer, done func(), err error) {
	cc := jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       true,
		MemoryStorage:     true,
		InactiveThreshold: 30 * time.Second,
	}
	if len(ti.filters) == 1 {
		cc.FilterSubject = ti.filters[0]
	} else {
		cc.FilterSubjects = ti.filters
	}
	oc, err = ti.stream.CreateConsumer(ctx, cc)
	if err != nil {
		return nil, nil, translate(err)
	}
	return oc, func() {
		dctx, cancel := b.withTimeout(context.WithoutCancel(ctx))
		defer cancel()
		_ = ti.stream.DeleteConsumer(dctx, oc.CachedInfo().Name)
	}, nil
}
