package limits

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

// BucketName is the JetStream key-value bucket that holds how many topics
// and groups each principal created. Every hub on the same NATS account
// shares it, which makes those quotas global. Keys are
// "topics.<subject>" and "groups.<subject>", the subject base64url-encoded;
// deleting a key (nats kv del eventhub_quotas …) gives the principal its
// quota back.
const BucketName = "eventhub_quotas"

// casAttempts bounds the compare-and-set retries of one count.
const casAttempts = 32

type counters struct {
	kv jetstream.KeyValue
}

// StartConfig says where the shared counters live.
type StartConfig struct {
	// Memory keeps the counters' bucket in memory (for hubs that keep
	// everything in memory); default file storage.
	Memory bool
	// Replicas of the bucket (default 1).
	Replicas int
}

// Start opens (or creates) the shared counters of the topic and group
// quotas in js. Without it those quotas are not enforced. It does nothing
// when no principal has a topic or group quota.
func (l *Limiter) Start(ctx context.Context, js jetstream.JetStream, sc StartConfig) error {
	if l == nil || !l.countsCreations() {
		return nil
	}
	st := jetstream.FileStorage
	if sc.Memory {
		st = jetstream.MemoryStorage
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      BucketName,
		Description: "eventhub: topics and groups created per principal (quotas)",
		History:     1,
		Storage:     st,
		Replicas:    max(1, sc.Replicas),
	})
	if err != nil {
		return fmt.Errorf("limits: quota counters bucket %s: %w", BucketName, err)
	}
	l.counters.Store(&counters{kv: kv})
	return nil
}

func (l *Limiter) countsCreations() bool {
	if l.cfg.Quotas.Topics > 0 || l.cfg.Quotas.Groups > 0 {
		return true
	}
	for _, p := range l.cfg.Principals {
		if p.Topics > 0 || p.Groups > 0 {
			return true
		}
	}
	return false
}

// CreateTopic is asked before the bus creates the stream of topic for the
// principal ctx carries: it counts the creation against the principal's
// topic quota, on every hub together. Refused: facade.ErrTopicQuota.
//
// undo gives the count back, for a creation that did not happen after all
// (it failed, or another hub or member made the stream first).
func (l *Limiter) CreateTopic(ctx context.Context, topic string) (undo func(), err error) {
	return l.create(ctx, "topics", topic)
}

// CreateGroup is asked before the bus creates a group's durable consumer
// for the principal ctx carries. Refused: facade.ErrGroupQuota.
// undo as for CreateTopic.
func (l *Limiter) CreateGroup(ctx context.Context, topic, group string) (undo func(), err error) {
	return l.create(ctx, "groups", topic+" "+group)
}

func noUndo() {}

func (l *Limiter) create(ctx context.Context, kind, what string) (undo func(), err error) {
	if l == nil {
		return noUndo, nil
	}
	subject, ok := PrincipalFrom(ctx)
	c := l.counters.Load()
	if !ok || c == nil {
		return noUndo, nil
	}
	q, class := l.quotas(subject)
	limit, sentinel, reason := q.Topics, facade.ErrTopicQuota, ReasonTopics
	if kind == "groups" {
		limit, sentinel, reason = q.Groups, facade.ErrGroupQuota, ReasonGroups
	}
	if limit == 0 {
		return noUndo, nil
	}
	key := kind + "." + base64.RawURLEncoding.EncodeToString([]byte(subject))
	if subject == "" {
		key = kind + "._"
	}
	for range casAttempts {
		var n int
		var rev uint64
		e, err := c.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return nil, fmt.Errorf("%w: quota counter: %w", facade.ErrUnavailable, err)
		default:
			if n, err = strconv.Atoi(string(e.Value())); err != nil {
				return nil, fmt.Errorf("%w: quota counter %s holds %q", facade.ErrUnavailable, key, e.Value())
			}
			rev = e.Revision()
		}
		if n >= limit {
			l.throttled(class, reason)
			return nil, fmt.Errorf("%w: %s: this principal created %d of %d %s", sentinel, what, n, limit, kind)
		}
		val := []byte(strconv.Itoa(n + 1))
		if rev == 0 {
			_, err = c.kv.Create(ctx, key, val)
		} else {
			_, err = c.kv.Update(ctx, key, val, rev)
		}
		if err == nil {
			return func() { l.uncount(c, key) }, nil
		}
		if !conflict(err) {
			return nil, fmt.Errorf("%w: quota counter: %w", facade.ErrUnavailable, err)
		}
	}
	return nil, fmt.Errorf("%w: quota counter %s: too many concurrent updates", facade.ErrUnavailable, key)
}

// uncount takes one back from the counter at key, with the same
// compare-and-set as create; a count it cannot give back (the store is
// unavailable) stays, as a creation that happened would.
func (l *Limiter) uncount(c *counters, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range casAttempts {
		e, err := c.kv.Get(ctx, key)
		if err != nil {
			return
		}
		n, err := strconv.Atoi(string(e.Value()))
		if err != nil || n <= 0 {
			return
		}
		_, err = c.kv.Update(ctx, key, []byte(strconv.Itoa(n-1)), e.Revision())
		if err == nil {
			return
		}
		if !conflict(err) {
			return
		}
	}
}

// conflict reports whether err is a lost compare-and-set.
func conflict(err error) bool {
	var ae *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		(errors.As(err, &ae) && ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
}
