package outbox

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// Defaults of [Config].
const (
	DefaultBatchSize       = 100
	DefaultLease           = 30 * time.Second
	DefaultPollInterval    = 250 * time.Millisecond
	DefaultMaxAttempts     = 10
	DefaultBackoffBase     = 500 * time.Millisecond
	DefaultBackoffMax      = 30 * time.Second
	DefaultTimeout         = 5 * time.Second
	DefaultRetention       = 24 * time.Hour
	DefaultCleanupInterval = time.Minute
)

// Config configures a [Drainer]. The zero value is valid: every unset field
// takes its default.
type Config struct {
	// BatchSize is how many records one claim takes (default 100, at most
	// 10 000).
	BatchSize int `yaml:"batchSize"`
	// Lease is how long a claim is held before another drainer may take the
	// records over (default 30s). Publishing a batch is cut short before its
	// lease runs out; the records not published by then are released.
	Lease time.Duration `yaml:"lease"`
	// PollInterval is how long the drainer waits before claiming again after
	// a claim found less than a full batch (default 250ms). [Drainer.Notify]
	// cuts the wait short.
	PollInterval time.Duration `yaml:"pollInterval"`
	// MaxAttempts is how many failed publishes a record gets before it is
	// parked as [StatusError] (default 10). Errors that retrying cannot fix
	// ([IsPermanent]) park it at once; failures that find the event store
	// unavailable ([IsUnavailable]) are not counted.
	MaxAttempts int `yaml:"maxAttempts"`
	// BackoffBase and BackoffMax bound the delay before a failed record is
	// retried: BackoffBase * 2^(attempts-1), at most BackoffMax, less up to
	// 20% jitter (defaults 500ms and 30s). The drainer backs off the same way
	// while the event store is unavailable.
	BackoffBase time.Duration `yaml:"backoffBase"`
	BackoffMax  time.Duration `yaml:"backoffMax"`
	// Timeout bounds one publish (or one pipelined batch of publishes) and
	// each database statement (default 5s).
	Timeout time.Duration `yaml:"timeout"`
	// Retention is how long sent records are kept before they are deleted
	// (default 24h; negative: keep them forever). CleanupInterval is how
	// often the drainer deletes them (default 1m).
	Retention       time.Duration `yaml:"retention"`
	CleanupInterval time.Duration `yaml:"cleanupInterval"`
	// WorkerID names this drainer in claimed_by. It must be unique among the
	// drainers of a table (default: hostname-pid-random).
	WorkerID string `yaml:"workerID"`
	// Sequential publishes one record at a time even when the publisher can
	// pipeline ([facade.AsyncPublisher]).
	Sequential bool `yaml:"sequential"`
	// Logger receives the drainer's logs; nil discards them.
	Logger *slog.Logger `yaml:"-"`
}

// Validate reports the first invalid setting, wrapping [ErrInvalidConfig].
func (c Config) Validate() error {
	switch {
	case c.BatchSize < 0 || c.BatchSize > 10_000:
		return fmt.Errorf("%w: BatchSize %d out of range 1..10000", ErrInvalidConfig, c.BatchSize)
	case c.Lease < 0 || c.Lease > 0 && c.Lease < 10*time.Millisecond:
		return fmt.Errorf("%w: Lease %v: at least 10ms", ErrInvalidConfig, c.Lease)
	case c.PollInterval < 0, c.BackoffBase < 0, c.BackoffMax < 0, c.Timeout < 0, c.CleanupInterval < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	case c.MaxAttempts < 0:
		return fmt.Errorf("%w: negative MaxAttempts", ErrInvalidConfig)
	case c.BackoffBase > 0 && c.BackoffMax > 0 && c.BackoffMax < c.BackoffBase:
		return fmt.Errorf("%w: BackoffMax %v below BackoffBase %v", ErrInvalidConfig, c.BackoffMax, c.BackoffBase)
	case len(c.WorkerID) > 200:
		return fmt.Errorf("%w: WorkerID longer than 200 bytes", ErrInvalidConfig)
	}
	return nil
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = max(DefaultBackoffMax, c.BackoffBase)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.CleanupInterval == 0 {
		c.CleanupInterval = DefaultCleanupInterval
	}
	if c.WorkerID == "" {
		c.WorkerID = defaultWorkerID()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// RetryHorizon is the longest time, with the defaults applied, between a
// record's first publish and its last retry while the event store keeps
// answering: the backoffs of MaxAttempts-1 retries, a Timeout per attempt and
// one Lease (a drainer lost mid-publish). The duplicate window of the topics'
// streams must be at least this long for retries to stay free of
// duplicates; it is about 3.3 minutes with the defaults, so give outbox
// topics a DuplicateWindow of 5 minutes or more.
func (c Config) RetryHorizon() time.Duration {
	c = c.WithDefaults()
	h := c.Lease
	for a := 1; a < c.MaxAttempts; a++ {
		h += c.backoffCeil(a) + c.Timeout
	}
	return h + c.Timeout
}

// backoffCeil is the delay before retry number attempt, without jitter.
func (c Config) backoffCeil(attempt int) time.Duration {
	d := c.BackoffBase
	for i := 1; i < attempt && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

// backoff is backoffCeil less up to 20% jitter, so that records and drainers
// that failed together do not retry together.
func (c Config) backoff(attempt int) time.Duration {
	d := c.backoffCeil(attempt)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "drainer"
	}
	var b [4]byte
	_, _ = cryptorand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// Stats are a drainer's counters since it was made, from [Drainer.Stats].
type Stats struct {
	// Batches counts claims that returned records; Claimed the records
	// they returned.
	Batches uint64
	Claimed uint64
	// Sent counts records published and marked sent.
	Sent uint64
	// Retried counts failed publishes handed back for a retry (counted
	// attempts).
	Retried uint64
	// Deferred counts records handed back because the event store was
	// unavailable, or not published because the drainer stopped (not counted
	// as attempts).
	Deferred uint64
	// Errored counts records this drainer parked as [StatusError].
	Errored uint64
	// Requeued counts expired claims (of any drainer) this drainer requeued.
	Requeued uint64
	// LeaseLost counts records published by this drainer whose claim had
	// been taken over before they could be marked (another drainer marks
	// them; the event id keeps the stream free of the duplicate).
	LeaseLost uint64
	// Deleted counts sent records deleted after Retention.
	Deleted uint64
	// DBErrors counts failed database statements.
	DBErrors uint64
}

type counters struct {
	batches, claimed, sent, retried, deferred, errored, requeued, leaseLost, deleted, dbErrors atomic.Uint64
}

// Drainer publishes the records of an outbox [Store] through a
// [facade.Publisher]: it claims batches with a lease, publishes each record
// with the record id as the event id, and marks it sent; failures are
// retried with backoff and parked after MaxAttempts. Several drainers, in one
// process or many, can drain one table.
//
// Its methods are safe for concurrent use.
type Drainer struct {
	store Backend
	pub   facade.Publisher
	async facade.AsyncPublisher
	cfg   Config
	log   *slog.Logger

	wake chan struct{}
	stop chan struct{} // closed by Shutdown / Close

	mu      sync.Mutex
	closed  bool
	running bool
	cancel  context.CancelFunc // of the running Run's context
	done    chan struct{}      // closed when the running Run returns

	c counters
}

// Backend is what a [Drainer] needs of an outbox store: [*Store] (SQL) and
// the MongoDB store of package outbox/mongo implement it. Each method
// blocks and is safe for concurrent use; see the methods of [Store] for
// their contracts (claims are leases fenced by worker and attempt).
type Backend interface {
	Claim(ctx context.Context, worker string, n int, lease time.Duration) ([]*Entry, error)
	MarkSent(ctx context.Context, entries ...*Entry) (int64, error)
	Release(ctx context.Context, opts ReleaseOptions, entries ...*Entry) (int64, error)
	MarkError(ctx context.Context, e *Entry, reason string) error
	RequeueExpired(ctx context.Context, maxAttempts int) (requeued, parked int64, err error)
	DeleteSent(ctx context.Context, olderThan time.Duration, limit int) (int64, error)
	// Table names the store in logs (a table or a collection).
	Table() string
}

var _ Backend = (*Store)(nil)

// isNil reports whether b is nil or a typed nil pointer.
func isNil(b Backend) bool {
	if b == nil {
		return true
	}
	if s, ok := b.(*Store); ok && s == nil {
		return true
	}
	return false
}

// NewDrainer returns a drainer of store publishing through pub. It does no
// I/O; [Drainer.Run] drains. The drainer closes neither store nor pub.
// Errors wrap [ErrInvalidConfig].
func NewDrainer(store Backend, pub facade.Publisher, cfg Config) (*Drainer, error) {
	if isNil(store) || pub == nil {
		return nil, fmt.Errorf("%w: NewDrainer needs a store and a publisher", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	d := &Drainer{
		store: store,
		pub:   pub,
		cfg:   cfg,
		log:   cfg.Logger.With("component", "outbox", "table", store.Table(), "worker", cfg.WorkerID),
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
	}
	if ap, ok := pub.(facade.AsyncPublisher); ok && !cfg.Sequential {
		d.async = ap
	}
	return d, nil
}

// Config returns the drainer's configuration, defaults applied.
func (d *Drainer) Config() Config { return d.cfg }

// Notify wakes the drainer to claim at once instead of at the end of its
// PollInterval: call it after committing a transaction that added records.
// It never blocks.
func (d *Drainer) Notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Stats returns a snapshot of the drainer's counters. For the table's
// backlog (pending count, oldest unsent record) see [Store.Stats].
func (d *Drainer) Stats() Stats {
	return Stats{
		Batches:   d.c.batches.Load(),
		Claimed:   d.c.claimed.Load(),
		Sent:      d.c.sent.Load(),
		Retried:   d.c.retried.Load(),
		Deferred:  d.c.deferred.Load(),
		Errored:   d.c.errored.Load(),
		Requeued:  d.c.requeued.Load(),
		LeaseLost: d.c.leaseLost.Load(),
		Deleted:   d.c.deleted.Load(),
		DBErrors:  d.c.dbErrors.Load(),
	}
}

// Run drains until it is stopped, blocking: it returns nil after
// [Drainer.Shutdown] or [Drainer.Close], ctx.Err() when ctx is done, and
// [ErrClosed] or [ErrRunning] when called after Close or while running.
// Database and publish errors do not stop it: they are logged, counted and
// retried with backoff. When ctx ends, the publishes in flight are abandoned
// and the batch's unpublished claims are released.
func (d *Drainer) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	if d.running {
		d.mu.Unlock()
		return ErrRunning
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	d.running, d.cancel, d.done = true, cancel, done
	d.mu.Unlock()
	defer func() {
		cancel()
		d.mu.Lock()
		d.running, d.cancel, d.done = false, nil, nil
		d.mu.Unlock()
		close(done)
	}()

	d.log.Info("outbox drainer started", "batch", d.cfg.BatchSize, "lease", d.cfg.Lease,
		"max_attempts", d.cfg.MaxAttempts, "pipelined", d.async != nil)
	requeueEvery := max(d.cfg.Lease/4, d.cfg.PollInterval)
	var lastRequeue, lastCleanup time.Time
	dbFailures, outages := 0, 0
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-d.stop:
			d.log.Info("outbox drainer stopped")
			return nil
		default:
		}
		if rctx.Err() != nil {
			return d.exitErr(ctx)
		}
		now := time.Now()
		if now.Sub(lastRequeue) >= requeueEvery {
			lastRequeue = now
			d.requeue(rctx)
		}
		if d.cfg.Retention > 0 && now.Sub(lastCleanup) >= d.cfg.CleanupInterval {
			lastCleanup = now
			d.cleanup(rctx)
		}
		n, unavailable, err := d.drainOnce(rctx, outages)
		if rctx.Err() == nil && err == nil {
			switch {
			case unavailable && outages == 0:
				d.log.Warn("outbox: event store unavailable; records wait and are retried")
			case !unavailable && outages > 0 && n > 0:
				d.log.Info("outbox: event store available again", "failed_rounds", outages)
			}
		}
		var wait time.Duration
		switch {
		case rctx.Err() != nil:
			continue
		case err != nil:
			dbFailures++
			d.c.dbErrors.Add(1)
			wait = d.cfg.backoff(dbFailures)
			d.log.Warn("outbox claim failed", "err", err, "retry_in", wait)
		case unavailable:
			dbFailures = 0
			outages++
			wait = max(d.cfg.PollInterval, d.cfg.backoff(outages))
		default:
			dbFailures = 0
			if n > 0 {
				outages = 0
			}
			if n < d.cfg.BatchSize {
				wait = d.cfg.PollInterval
			}
		}
		if wait <= 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-d.wake:
		case <-d.stop:
		case <-rctx.Done():
		}
		if !timer.Stop() {
			select { // drain a fire that raced with another case
			case <-timer.C:
			default:
			}
		}
	}
}

// exitErr is what Run returns once its context is cancelled: nil when Close
// cancelled it, ctx.Err() when the caller's ctx ended.
func (d *Drainer) exitErr(ctx context.Context) error {
	select {
	case <-d.stop:
		d.log.Info("outbox drainer stopped")
		return nil
	default:
	}
	return ctx.Err()
}

// Shutdown stops the drainer gracefully: the batch in progress is published
// and settled, and Run returns. It blocks until Run has returned or ctx is
// done; then it abandons the batch's publishes in flight (their unpublished
// claims are released) and returns ctx.Err(). A drainer that is shut down
// cannot run again. Calling it when not running, or again, returns nil.
func (d *Drainer) Shutdown(ctx context.Context) error {
	done, cancel := d.markClosed()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		cancel()
		return ctx.Err()
	}
}

// Close stops the drainer at once: publishes in flight are abandoned (a
// record that was in fact stored is deduplicated by its id when retried),
// successful ones are marked sent, the others released. It blocks until Run
// has returned. It is idempotent.
func (d *Drainer) Close() error {
	done, cancel := d.markClosed()
	if done == nil {
		return nil
	}
	cancel()
	<-done
	return nil
}

func (d *Drainer) markClosed() (chan struct{}, context.CancelFunc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.closed = true
		close(d.stop)
	}
	return d.done, d.cancel
}

// dbCtx bounds a database statement of the drainer.
func (d *Drainer) dbCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.cfg.Timeout)
}

// settleCtx is the context of the statements that record what happened to a
// batch: they must run even when the drainer is being closed.
func (d *Drainer) settleCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
}

func (d *Drainer) requeue(ctx context.Context) {
	ctx, cancel := d.dbCtx(ctx)
	defer cancel()
	requeued, parked, err := d.store.RequeueExpired(ctx, d.cfg.MaxAttempts)
	if err != nil {
		if ctx.Err() == nil {
			d.c.dbErrors.Add(1)
			d.log.Warn("outbox requeue of expired claims failed", "err", err)
		}
		return
	}
	d.c.requeued.Add(uint64(requeued))
	d.c.errored.Add(uint64(parked))
	if requeued+parked > 0 {
		d.log.Warn("outbox claims expired", "requeued", requeued, "parked", parked)
	}
}

func (d *Drainer) cleanup(ctx context.Context) {
	const chunk = 1000
	for ctx.Err() == nil {
		dctx, cancel := d.dbCtx(ctx)
		n, err := d.store.DeleteSent(dctx, d.cfg.Retention, chunk)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				d.c.dbErrors.Add(1)
				d.log.Warn("outbox cleanup failed", "err", err)
			}
			return
		}
		d.c.deleted.Add(uint64(n))
		if n < chunk {
			return
		}
	}
}

// errNotPublished marks the records of a batch that were not published
// (stopping, lease running out, or the store found unavailable).
var errNotPublished = errors.New("not published")

// drainOnce claims one batch, publishes it and settles every claim. It
// reports how many records it claimed and whether the event store was
// unavailable; its error is the claim's.
func (d *Drainer) drainOnce(ctx context.Context, outages int) (int, bool, error) {
	start := time.Now()
	cctx, cancel := d.dbCtx(ctx)
	entries, err := d.store.Claim(cctx, d.cfg.WorkerID, d.cfg.BatchSize, d.cfg.Lease)
	cancel()
	if err != nil || len(entries) == 0 {
		if ctx.Err() != nil {
			err = nil
		}
		return 0, false, err
	}
	d.c.batches.Add(1)
	d.c.claimed.Add(uint64(len(entries)))
	// Stop publishing a tenth of the lease before it runs out, so that the
	// batch is settled before another drainer may requeue it.
	leaseEnd := start.Add(d.cfg.Lease - d.cfg.Lease/10)
	var results []error
	if d.async != nil {
		results = d.publishPipelined(ctx, entries, leaseEnd)
	} else {
		results = d.publishSequential(ctx, entries, leaseEnd)
	}
	unavailable := d.settle(ctx, entries, results, outages)
	return len(entries), unavailable, nil
}

func (d *Drainer) publishSequential(ctx context.Context, entries []*Entry, leaseEnd time.Time) []error {
	results := make([]error, len(entries))
	stop := false
	for i, e := range entries {
		if stop || ctx.Err() != nil || !time.Now().Before(leaseEnd) {
			results[i] = errNotPublished
			continue
		}
		pctx, cancel := context.WithDeadline(ctx, earliest(time.Now().Add(d.cfg.Timeout), leaseEnd))
		_, err := d.pub.Publish(pctx, e.Topic, e.Payload, e.publishOptions())
		cancel()
		results[i] = err
		if err != nil && (IsUnavailable(err) || ctx.Err() != nil) {
			// The store is down (or we are stopping): do not wait out a
			// timeout for each of the remaining records.
			stop = true
		}
	}
	return results
}

func (d *Drainer) publishPipelined(ctx context.Context, entries []*Entry, leaseEnd time.Time) []error {
	results := make([]error, len(entries))
	futures := make([]facade.PublishFuture, len(entries))
	pctx, cancel := context.WithDeadline(ctx, earliest(time.Now().Add(d.cfg.Timeout), leaseEnd))
	defer cancel()
	stop := false
	waited := 0 // futures[:waited] have been waited for
	for i, e := range entries {
		if stop || pctx.Err() != nil {
			results[i] = errNotPublished
			continue
		}
		// Keep at most maxInFlight publishes unacknowledged: the
		// publisher's own window may be smaller than a batch, and a full
		// window fails publishes instead of waiting.
		for ; waited < i-maxInFlight+1; waited++ {
			if futures[waited] != nil {
				_, results[waited] = futures[waited].Wait(pctx)
			}
		}
		f, err := d.async.PublishAsync(pctx, e.Topic, e.Payload, e.publishOptions())
		if err != nil {
			results[i] = err
			stop = IsUnavailable(err) || ctx.Err() != nil
			continue
		}
		futures[i] = f
	}
	for ; waited < len(futures); waited++ {
		if futures[waited] != nil {
			_, results[waited] = futures[waited].Wait(pctx)
		}
	}
	return results
}

// maxInFlight bounds a drainer's unacknowledged pipelined publishes.
const maxInFlight = 1000

// settle records the outcome of each claim of a batch and reports whether
// the event store was unavailable.
func (d *Drainer) settle(ctx context.Context, entries []*Entry, results []error, outages int) bool {
	sctx, cancel := d.settleCtx(ctx)
	defer cancel()
	var sent []*Entry
	releases := make(map[ReleaseOptions][]*Entry)
	var parks []*Entry
	parkReasons := make(map[*Entry]string)
	unavailable := false
	outageDelay := d.cfg.backoff(outages + 1)
	for i, e := range entries {
		err := results[i]
		switch {
		case err == nil:
			sent = append(sent, e)
		case errors.Is(err, errNotPublished) || ctx.Err() != nil && errors.Is(err, context.Canceled):
			// Never sent, or abandoned because the drainer is closing:
			// hand back without counting an attempt.
			k := ReleaseOptions{Uncount: true}
			releases[k] = append(releases[k], e)
		case IsPermanent(err):
			parks = append(parks, e)
			parkReasons[e] = err.Error()
		case IsUnavailable(err):
			unavailable = true
			k := ReleaseOptions{Uncount: true, Delay: outageDelay, Reason: "event store unavailable: " + err.Error()}
			releases[k] = append(releases[k], e)
		case e.Attempts >= d.cfg.MaxAttempts:
			parks = append(parks, e)
			parkReasons[e] = fmt.Sprintf("gave up after %d attempts: %v", e.Attempts, err)
		default:
			k := ReleaseOptions{Delay: d.cfg.backoff(e.Attempts), Reason: err.Error()}
			releases[k] = append(releases[k], e)
			d.c.retried.Add(1)
		}
	}
	if unavailable {
		// Records not tried because the store was found down wait with the
		// others instead of being claimed again at once.
		k := ReleaseOptions{Uncount: true}
		if es := releases[k]; len(es) > 0 {
			delete(releases, k)
			k2 := ReleaseOptions{Uncount: true, Delay: outageDelay}
			releases[k2] = append(releases[k2], es...)
		}
	}
	if len(sent) > 0 {
		n, err := d.store.MarkSent(sctx, sent...)
		if err != nil {
			// They stay claimed; after the lease another drainer publishes
			// them again and the event ids make that a no-op in the stream.
			d.c.dbErrors.Add(1)
			d.log.Error("outbox mark sent failed", "records", len(sent), "err", err)
		} else {
			d.c.sent.Add(uint64(n))
			if lost := int64(len(sent)) - n; lost > 0 {
				d.c.leaseLost.Add(uint64(lost))
				d.log.Warn("outbox leases lost before marking sent", "records", lost)
			}
		}
	}
	for _, e := range parks {
		reason := parkReasons[e]
		if err := d.store.MarkError(sctx, e, reason); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				d.c.leaseLost.Add(1)
			} else {
				d.c.dbErrors.Add(1)
			}
			d.log.Error("outbox park failed", "id", e.ID, "err", err)
			continue
		}
		d.c.errored.Add(1)
		d.log.Error("outbox record parked", "id", e.ID, "topic", e.Topic, "attempts", e.Attempts, "reason", reason)
	}
	for k, es := range releases {
		if _, err := d.store.Release(sctx, k, es...); err != nil {
			d.c.dbErrors.Add(1)
			d.log.Error("outbox release failed", "records", len(es), "err", err)
			continue
		}
		if k.Uncount {
			d.c.deferred.Add(uint64(len(es)))
		}
		if k.Reason != "" && !k.Uncount {
			d.log.Warn("outbox publish failed, will retry", "records", len(es), "reason", k.Reason, "retry_in", k.Delay)
		}
	}
	if unavailable {
		d.log.Debug("outbox: event store unavailable", "retry_in", outageDelay)
	}
	return unavailable
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
