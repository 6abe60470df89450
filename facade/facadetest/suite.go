package facadetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
)

// Run runs every conformance case against env.
func Run(t *testing.T, env Env) {
	cases := []struct {
		name string
		fn   func(*testing.T, Env)
		skip bool
		// serial: the case restarts the store, so it runs alone.
		serial bool
	}{
		{"PublishSubscribeEarliest", testEarliest, false, false},
		{"EnvelopeRoundTrip", testEnvelope, false, false},
		{"FromLatest", testLatest, false, false},
		{"FromTS", testFromTS, false, false},
		{"FromAfterID", testFromAfterID, false, false},
		{"AfterIDUnknown", testAfterIDUnknown, false, false},
		{"OrderWithinTopic", testOrder, false, false},
		{"GroupMembersShareWork", testGroupShares, false, false},
		{"TwoGroupsEachSeeAll", testTwoGroups, false, false},
		{"HandlerErrorRedelivers", testHandlerError, false, false},
		{"NackRedelivers", testNack, false, false},
		{"MaxAttemptsDeadLetters", testDeadLetter, false, false},
		{"RetryPolicyList", testRetryList, false, false},
		{"RetryPolicyExponential", testRetryExponential, false, false},
		{"RetryPolicyIsTheGroups", testRetryIsTheGroups, false, false},
		{"RetryPolicyOnExpiredLease", testRetryExpiredLease, false, false},
		{"OrderByKeyPerKeyOrderParallelKeys", testOrderByKey, false, false},
		{"OrderByKeyNackHoldsKey", testOrderByKeyNackHolds, false, false},
		{"OrderByKeyExpiredLeaseHoldsKey", testOrderByKeyExpiryHolds, false, false},
		{"OrderByKeyMemberCrashHoldingKey", testOrderByKeyMemberCrash, false, false},
		{"OrderByIsTheGroups", testOrderByIsTheGroups, false, false},
		{"OutOfOrderAcksThenRestartOfHub", testOutOfOrderAcks, false, false},
		{"SetCursorRewindsAndSkips", testSetCursor, env.Features.NoCursors, false},
		{"GetCursorUnknownGroup", testCursorUnknown, env.Features.NoCursors, false},
		{"MaxInFlightBoundsHandlers", testMaxInFlight, false, false},
		{"DuplicateIDStoredOnce", testDuplicateID, false, false},
		{"BadInput", testBadInput, false, false},
		{"FanInTopics", testFanIn, false, false},
		{"WildcardGroupOnFamily", testWildcardFamily, env.Family == "", false},
		{"WildcardGroupMembersShareWork", testWildcardShares, env.Family == "", false},
		{"WildcardGroupFanIn", testWildcardFanIn, env.Family == "", false},
		{"WildcardGroupCursor", testWildcardCursor, env.Family == "" || env.Features.NoCursors, false},
		{"WildcardGroupAcrossStreamsRefused", testWildcardRefused, false, false},
		{"ManualAckFanInSettlesEveryTopic", testManualAckFanIn, false, false},
		{"SettleAfterExpiry", testSettleAfterExpiry, false, false},
		{"AfterExpireTellsTheHolder", testAfterExpire, false, false},
		{"ExtendKeepsDelivery", testExtend, false, false},
		{"DrainWaitsForSettlement", testDrain, false, false},
		{"StopHandsBack", testStop, false, false},
		{"SubscriptionEndedByClose", testEndedByClose, false, false},
		{"FollowLive", testFollow, false, false},
		{"Filter", testFilter, env.Features.NoFilter, false},
		{"KeyedEventsAndLatestByKey", testKeys, env.Features.NoKeys, false},
		{"CompareAndSetKey", testCompareAndSet, false, false},
		{"DeleteKey", testDeleteKey, false, false},
		{"KeyTTL", testKeyTTL, false, false},
		{"WatchKeys", testWatch, false, false},
		{"WatchKeyExpiry", testWatchExpiry, env.Expiring == "", false},
		{"PlainNATSPublisherToHub", testInteropIn, env.Native == nil, false},
		{"HubToPlainJetStreamConsumer", testInteropOut, env.Native == nil, false},
		{"RestartKeepsEventsAndCursors", testRestart, env.Restart == nil || env.Features.NoCursors, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.skip {
				t.Skip("not supported by this implementation")
			}
			if !c.serial {
				t.Parallel()
			}
			c.fn(t, env)
		})
	}
}

func testEarliest(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	sent := publishN(t, b, topic, 3)
	c := newCollector()
	// MaxInFlight 1: one handler at a time, so handlers see delivery order.
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: 1})
	got := c.take(t, 3)
	for i, r := range got {
		if r.e.ID != sent[i].ID || num(t, r.e) != i {
			t.Fatalf("delivery %d: got %s %s, want %s", i, r.e.ID, r.e.Payload, sent[i].ID)
		}
		if r.d.Attempt() != 1 || r.d.MaxAttempts() != facade.DefaultMaxAttempts || r.d.Group() != group {
			t.Fatalf("delivery context %+v", r.d)
		}
	}
	if !env.Features.NoCursors {
		testutil.CheckFor(t, waitTimeout, func() error {
			cur, err := b.GetCursor(t.Context(), topic, group)
			if err != nil {
				return err
			}
			if cur.LastID != sent[2].ID || cur.Pending != 0 {
				return fmt.Errorf("cursor %+v, want last id %s", cur, sent[2].ID)
			}
			return nil
		})
	}
}

func testEnvelope(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	part := 3
	sent := publish(t, b, topic, `{"a":[1,2,{"b":null}],"s":"é"}`, facade.PublishOptions{
		TS: 1_700_000_000_000, Key: "host:name:1234", Partition: &part,
		Headers: map[string]string{"correlationId": "c-1", "X-Mixed": "v"},
		Tags:    []string{"#duck", "#stt"}, CausedBy: []string{facade.NewID()}, SID: facade.NewID(),
	})
	if sent.ID == "" || sent.Seq == 0 || sent.TS != 1_700_000_000_000 {
		t.Fatalf("published record %+v", sent)
	}
	if _, ok := facade.IDTime(sent.ID); !ok {
		t.Fatalf("id %q is not a uuidv7", sent.ID)
	}
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{From: facade.FromEarliest})
	got := c.next(t).e
	want, _ := json.Marshal(sent)
	have, _ := json.Marshal(got)
	var w, h map[string]any
	_ = json.Unmarshal(want, &w)
	_ = json.Unmarshal(have, &h)
	if fmt.Sprint(w) != fmt.Sprint(h) {
		t.Fatalf("envelope changed on the way:\n sent %s\n  got %s", want, have)
	}
}

func testLatest(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	publishN(t, b, topic, 2)
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{})
	e := publish(t, b, topic, `{"n":99}`, facade.PublishOptions{})
	if got := c.next(t).e; got.ID != e.ID {
		t.Fatalf("from latest delivered %s, want only the new event", got.Payload)
	}
	c.quiet(t, 200*time.Millisecond)
}

func testFromTS(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	publishN(t, b, topic, 2)
	// Stored times have millisecond resolution here; step past the last one.
	boundary := time.Now().Add(20 * time.Millisecond)
	for time.Now().Before(boundary) {
		time.Sleep(5 * time.Millisecond)
	}
	later := publish(t, b, topic, `{"n":2}`, facade.PublishOptions{})
	publish(t, b, topic, `{"n":3}`, facade.PublishOptions{})
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{From: facade.FromTS, TS: boundary.UnixMilli()})
	if got := nums(t, c.take(t, 2)); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("from ts delivered %v, want [2 3] (first %s)", got, later.ID)
	}
	c.quiet(t, 100*time.Millisecond)
}

func testFromAfterID(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	sent := publishN(t, b, topic, 5)
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{From: facade.FromAfterID, AfterID: sent[1].ID})
	if got := nums(t, c.take(t, 3)); !slices.Equal(got, seq(2, 5)) {
		t.Fatalf("after id delivered %v, want [2 3 4]", got)
	}
	c.quiet(t, 100*time.Millisecond)
}

func testAfterIDUnknown(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	publishN(t, b, topic, 3)
	c := newCollector()
	_, err := b.Subscribe(t.Context(), topic, group, c.handle, facade.SubscribeOptions{From: facade.FromAfterID, AfterID: facade.NewID()})
	if !errors.Is(err, facade.ErrUnknownID) {
		t.Fatalf("unknown afterId: err %v, want ErrUnknownID (never a replay from the start)", err)
	}
}

func testOrder(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	const n = 200
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{MaxInFlight: 1})
	publishN(t, b, topic, n)
	for i, r := range c.take(t, n) {
		if num(t, r.e) != i {
			t.Fatalf("delivery %d has n=%d", i, num(t, r.e))
		}
	}
}

func testGroupShares(t *testing.T, env Env) {
	b1, b2 := env.NewBus(t), env.NewBus(t)
	topic, group := names(t)
	const n = 200
	var mu sync.Mutex
	seen := map[string]int{}
	per := [2]atomic.Int64{}
	h := func(i int) facade.Handler {
		return func(_ context.Context, d facade.Delivery) error {
			e := d.Event()
			mu.Lock()
			seen[e.ID]++
			mu.Unlock()
			per[i].Add(1)
			time.Sleep(time.Millisecond) // a little work, so both members get some
			return nil
		}
	}
	subscribe(t, b1, topic, group, h(0), facade.SubscribeOptions{From: facade.FromEarliest, BatchSize: 10})
	subscribe(t, b2, topic, group, h(1), facade.SubscribeOptions{From: facade.FromEarliest, BatchSize: 10})
	publishN(t, b1, topic, n)
	testutil.CheckFor(t, waitTimeout, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != n {
			return fmt.Errorf("%d of %d events delivered", len(seen), n)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("event %s delivered %d times to one group", id, k)
		}
	}
	if per[0].Load() == 0 || per[1].Load() == 0 {
		t.Fatalf("work not shared: %d / %d", per[0].Load(), per[1].Load())
	}
}

func testTwoGroups(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c1, c2 := newCollector(), newCollector()
	subscribe(t, b, topic, group+"-1", c1.handle, facade.SubscribeOptions{})
	subscribe(t, b, topic, group+"-2", c2.handle, facade.SubscribeOptions{})
	publishN(t, b, topic, 20)
	for _, c := range []*collector{c1, c2} {
		if got := nums(t, c.take(t, 20)); !slices.Equal(got, seq(0, 20)) {
			t.Fatalf("group got %v", got)
		}
	}
}

func testHandlerError(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	c.fail = func(e *facade.EventRecord, d facade.Delivery) error {
		if d.Attempt() == 1 {
			return errors.New("boom")
		}
		return nil
	}
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{})
	e := publish(t, b, topic, `{"n":1}`, facade.PublishOptions{})
	first, second := c.next(t), c.next(t)
	if first.e.ID != e.ID || second.e.ID != e.ID || first.d.Attempt() != 1 || second.d.Attempt() != 2 {
		t.Fatalf("want the event twice with attempts 1, 2; got %s/%d, %s/%d", first.e.ID, first.d.Attempt(), second.e.ID, second.d.Attempt())
	}
	c.quiet(t, 300*time.Millisecond)
}

func testNack(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{ManualAck: true})
	e := publish(t, b, topic, `{"n":1}`, facade.PublishOptions{})
	first := c.next(t)
	if err := first.d.Nack(t.Context(), "try again"); err != nil {
		t.Fatal(err)
	}
	if err := first.d.Ack(t.Context()); !errors.Is(err, facade.ErrSettled) {
		t.Fatalf("ack after nack: %v, want ErrSettled", err)
	}
	second := c.next(t)
	if second.e.ID != e.ID || second.d.Attempt() != 2 || first.d.Attempt() != 1 {
		t.Fatalf("after nack: %s attempt %d", second.e.ID, second.d.Attempt())
	}
	if err := second.d.Ack(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := second.d.Ack(t.Context()); !errors.Is(err, facade.ErrSettled) {
		t.Fatalf("second ack: %v, want ErrSettled", err)
	}
	if err := second.d.Nack(t.Context(), "too late"); !errors.Is(err, facade.ErrSettled) {
		t.Fatalf("nack after ack: %v, want ErrSettled", err)
	}
	c.quiet(t, 300*time.Millisecond)
}

func testDeadLetter(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	c.fail = func(e *facade.EventRecord, _ facade.Delivery) error {
		if num(t, e) == 0 {
			return errors.New("poison")
		}
		return nil
	}
	dl := newCollector()
	subscribe(t, b, facade.DeadLetterTopic(topic), group, dl.handle, facade.SubscribeOptions{From: facade.FromEarliest})
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{MaxAttempts: 3, MaxInFlight: 1})
	sent := publishN(t, b, topic, 2)
	// n=0 three times (attempts 1..3), then n=1 once: the poison no longer blocks.
	var attempts []int
	for {
		r := c.next(t)
		if num(t, r.e) == 1 {
			break
		}
		attempts = append(attempts, r.d.Attempt())
	}
	if !slices.Equal(attempts, []int{1, 2, 3}) {
		t.Fatalf("poison attempts %v, want [1 2 3]", attempts)
	}
	d := dl.next(t).e
	if num(t, d) != 0 || d.Headers["dlq_group"] != group || d.Headers["dlq_reason"] != "poison" ||
		d.Headers["dlq_id"] != sent[0].ID || d.Headers["dlq_attempts"] != "3" || d.Headers["dlq_topic"] != topic {
		t.Fatalf("dead letter %+v", d)
	}
	if !env.Features.NoCursors {
		testutil.CheckFor(t, waitTimeout, func() error {
			cur, err := b.GetCursor(t.Context(), topic, group)
			if err != nil {
				return err
			}
			if cur.LastID != sent[1].ID {
				return fmt.Errorf("cursor %+v stuck before %s", cur, sent[1].ID)
			}
			return nil
		})
	}
}

func testOutOfOrderAcks(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	sub := subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{ManualAck: true, AckTimeoutMs: 60_000})
	sent := publishN(t, b, topic, 5)
	got := c.take(t, 5)
	for _, i := range []int{0, 2, 4} {
		if got[i].e.ID != sent[i].ID {
			t.Fatalf("delivery %d is %s, want %s (stream order)", i, got[i].e.ID, sent[i].ID)
		}
		if err := got[i].d.Ack(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if !env.Features.NoCursors {
		testutil.CheckFor(t, waitTimeout, func() error {
			cur, err := b.GetCursor(t.Context(), topic, group)
			if err != nil {
				return err
			}
			if cur.LastID != sent[0].ID || cur.Pending != 2 {
				return fmt.Errorf("cursor %+v, want last %s with 2 pending", cur, sent[0].ID)
			}
			return nil
		})
	}
	// The hub stops (its members go away) and a new one takes over.
	if err := sub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := got[1].d.Ack(t.Context()); !errors.Is(err, facade.ErrClosed) {
		t.Fatalf("ack after the subscription stopped: %v, want ErrClosed (handed back)", err)
	}
	b2 := env.NewBus(t)
	c2 := newCollector()
	subscribe(t, b2, topic, group, c2.handle, facade.SubscribeOptions{AckTimeoutMs: 60_000})
	got = c2.take(t, 2)
	ns := []int{num(t, got[0].e), num(t, got[1].e)}
	slices.Sort(ns)
	if !slices.Equal(ns, []int{1, 3}) {
		t.Fatalf("redelivered %v, want exactly the unacked [1 3]", ns)
	}
	c2.quiet(t, 300*time.Millisecond)
}

func testSetCursor(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	sub := subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{From: facade.FromEarliest})
	sent := publishN(t, b, topic, 5)
	// Times have millisecond resolution: leave a gap before the second half.
	boundary := time.Now().Add(20 * time.Millisecond)
	for time.Now().Before(boundary) {
		time.Sleep(5 * time.Millisecond)
	}
	for i := 5; i < 10; i++ {
		sent = append(sent, publish(t, b, topic, fmt.Sprintf(`{"n":%d}`, i), facade.PublishOptions{}))
	}
	c.take(t, 10)
	testutil.CheckFor(t, waitTimeout, func() error {
		cur, err := b.GetCursor(t.Context(), topic, group)
		if err != nil {
			return err
		}
		if cur.LastID != sent[9].ID {
			return fmt.Errorf("cursor %+v", cur)
		}
		return nil
	})
	_ = sub.Stop(t.Context())

	expect := func(how string, pos facade.CursorPosition, first int) {
		t.Helper()
		if err := b.SetCursor(t.Context(), topic, group, pos); err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		cur, err := b.GetCursor(t.Context(), topic, group)
		if err != nil {
			t.Fatal(err)
		}
		wantLast := ""
		if first > 0 {
			wantLast = sent[first-1].ID
		}
		if cur.LastID != wantLast || cur.Pending != uint64(10-first) {
			t.Fatalf("%s: cursor %+v, want last %q and %d pending", how, *cur, wantLast, 10-first)
		}
		c := newCollector()
		sub := subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{})
		if got := nums(t, c.take(t, 10-first)); !slices.Equal(got, seq(first, 10)) {
			t.Fatalf("%s: got %v, want %v", how, got, seq(first, 10))
		}
		c.quiet(t, 100*time.Millisecond)
		// Let the acks land before the next move: acks still in flight
		// when a cursor moves may count (see Cursors.SetCursor).
		testutil.CheckFor(t, waitTimeout, func() error {
			cur, err := b.GetCursor(t.Context(), topic, group)
			if err != nil {
				return err
			}
			if cur.LastID != sent[9].ID || cur.Pending != 0 {
				return fmt.Errorf("%s: cursor %+v not settled", how, *cur)
			}
			return nil
		})
		_ = sub.Stop(t.Context())
	}
	expect("rewind by seq", facade.CursorPosition{LastSeq: sent[2].Seq}, 3)
	expect("skip by id", facade.CursorPosition{LastID: sent[7].ID}, 8)
	expect("rewind by ts", facade.CursorPosition{LastTS: boundary.UnixMilli()}, 5)
	expect("rewind to start", facade.CursorPosition{}, 0)

	// A group that does not exist yet is created at the position.
	if err := b.SetCursor(t.Context(), topic, group+"-new", facade.CursorPosition{LastID: sent[8].ID}); err != nil {
		t.Fatal(err)
	}
	c2 := newCollector()
	subscribe(t, b, topic, group+"-new", c2.handle, facade.SubscribeOptions{From: facade.FromEarliest})
	if n := num(t, c2.next(t).e); n != 9 {
		t.Fatalf("new group at cursor: got n=%d, want 9", n)
	}
}

func testCursorUnknown(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	publishN(t, b, topic, 1)
	if _, err := b.GetCursor(t.Context(), topic, group); !errors.Is(err, facade.ErrNotFound) {
		t.Fatalf("cursor of unknown group: %v, want ErrNotFound", err)
	}
	if _, err := b.GetCursor(t.Context(), topic+".none", group); !errors.Is(err, facade.ErrNotFound) {
		t.Fatalf("cursor of unknown topic: %v, want ErrNotFound", err)
	}
}

func testMaxInFlight(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	const limit, n = 3, 12
	var running, peak, done atomic.Int64
	release := make(chan struct{})
	h := func(ctx context.Context, _ facade.Delivery) error {
		r := running.Add(1)
		for {
			p := peak.Load()
			if r <= p || peak.CompareAndSwap(p, r) {
				break
			}
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		running.Add(-1)
		done.Add(1)
		return nil
	}
	subscribe(t, b, topic, group, h, facade.SubscribeOptions{MaxInFlight: limit})
	publishN(t, b, topic, n)
	testutil.CheckFor(t, waitTimeout, func() error {
		if running.Load() != limit {
			return fmt.Errorf("%d handlers running, want %d", running.Load(), limit)
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // give a 4th handler the chance to start wrongly
	close(release)
	testutil.CheckFor(t, waitTimeout, func() error {
		if done.Load() != n {
			return fmt.Errorf("%d of %d handled", done.Load(), n)
		}
		return nil
	})
	if peak.Load() != limit {
		t.Fatalf("peak concurrency %d, want %d", peak.Load(), limit)
	}
}

func testDuplicateID(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	id := facade.NewID()
	e1 := publish(t, b, topic, `{"n":0}`, facade.PublishOptions{ID: id})
	for time.Now().UnixMilli() <= e1.TS+1 {
		time.Sleep(time.Millisecond) // let the clock pass the first ts
	}
	e2 := publish(t, b, topic, `{"n":0}`, facade.PublishOptions{ID: id})
	if e1.Seq != e2.Seq {
		t.Fatalf("duplicate publish stored again: seq %d then %d", e1.Seq, e2.Seq)
	}
	// The answer is the stored event's position and time, not the retry's.
	if e2.TS != e1.TS || e2.ID != id {
		t.Fatalf("duplicate publish answered ts %d id %s, stored ts %d id %s", e2.TS, e2.ID, e1.TS, id)
	}
	publish(t, b, topic, `{"n":1}`, facade.PublishOptions{})
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{From: facade.FromEarliest})
	got := c.take(t, 2)
	ids := []string{got[0].e.ID, got[1].e.ID}
	if !slices.Contains(ids, id) || !slices.Equal(nums(t, got), []int{0, 1}) {
		t.Fatalf("got %v %v", ids, nums(t, got))
	}
	c.quiet(t, 100*time.Millisecond)
}

func testBadInput(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	ctx := t.Context()
	pubs := []struct {
		name, topic, payload string
		wantErr              error
	}{
		{"empty topic", "", `1`, facade.ErrBadTopic},
		{"wildcard topic", "a.*", `1`, facade.ErrBadTopic},
		{"double dot", "a..b", `1`, facade.ErrBadTopic},
		{"space", "a b", `1`, facade.ErrBadTopic},
		{"reserved segment", topic + "._k", `1`, facade.ErrBadTopic},
		{"not json", topic, `{nope`, facade.ErrBadPayload},
		{"two values", topic, `1 2`, facade.ErrBadPayload},
		{"empty payload", topic, ``, facade.ErrBadPayload},
	}
	for _, tc := range pubs {
		if _, err := b.Publish(ctx, tc.topic, json.RawMessage(tc.payload), facade.PublishOptions{}); !errors.Is(err, tc.wantErr) {
			t.Errorf("publish %s: err %v, want %v", tc.name, err, tc.wantErr)
		}
	}
	nop := func(context.Context, facade.Delivery) error { return nil }
	subs := []struct {
		name, topic, group string
		opts               facade.SubscribeOptions
		wantErr            error
	}{
		{"bad group", topic, "a b", facade.SubscribeOptions{}, facade.ErrBadGroup},
		{"bad from", topic, group, facade.SubscribeOptions{From: "yesterday"}, facade.ErrInvalidOption},
		{"bad subscribe topic", "a.>", group, facade.SubscribeOptions{}, facade.ErrBadTopic},
		{"retry min above max", topic, group, facade.SubscribeOptions{Retry: &facade.RetryPolicy{MinBackoffMs: 2000, MaxBackoffMs: 1000}}, facade.ErrInvalidOption},
		{"retry list and min", topic, group, facade.SubscribeOptions{Retry: &facade.RetryPolicy{MinBackoffMs: 10, BackoffMs: []int64{10}}}, facade.ErrInvalidOption},
		{"retry negative", topic, group, facade.SubscribeOptions{Retry: &facade.RetryPolicy{BackoffMs: []int64{100, -1}}}, facade.ErrInvalidOption},
		{"retry empty list", topic, group, facade.SubscribeOptions{Retry: &facade.RetryPolicy{BackoffMs: []int64{}}}, facade.ErrInvalidOption},
		{"orderBy unknown", topic, group, facade.SubscribeOptions{OrderBy: "partition"}, facade.ErrInvalidOption},
		{"retry above a day", topic, group, facade.SubscribeOptions{Retry: &facade.RetryPolicy{MaxBackoffMs: facade.MaxBackoffMs + 1}}, facade.ErrInvalidOption},
	}
	for _, tc := range subs {
		if _, err := b.Subscribe(ctx, tc.topic, tc.group, nop, tc.opts); !errors.Is(err, tc.wantErr) {
			t.Errorf("subscribe %s: err %v, want %v", tc.name, err, tc.wantErr)
		}
	}
	// The bus is still fine.
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{})
	e := publish(t, b, topic, `{"ok":true}`, facade.PublishOptions{})
	if got := c.next(t).e; got.ID != e.ID {
		t.Fatalf("after bad input: got %s", got.ID)
	}
}

func testFanIn(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	other := topic + ".other"
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{Topics: []string{other}})
	publish(t, b, topic, `{"n":1}`, facade.PublishOptions{})
	publish(t, b, other, `{"n":2}`, facade.PublishOptions{})
	got := c.take(t, 2)
	topics := []string{got[0].e.Topic, got[1].e.Topic}
	slices.Sort(topics)
	if !slices.Equal(topics, []string{topic, other}) {
		t.Fatalf("fan-in delivered topics %v", topics)
	}
}

func testFilter(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{Filter: func(e *facade.EventRecord) bool {
		return slices.Contains(e.Tags, "keep")
	}})
	publish(t, b, topic, `{"n":0}`, facade.PublishOptions{})
	publish(t, b, topic, `{"n":1}`, facade.PublishOptions{Tags: []string{"keep"}})
	if n := num(t, c.next(t).e); n != 1 {
		t.Fatalf("filter let n=%d through", n)
	}
	c.quiet(t, 100*time.Millisecond)
}

func testKeys(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	kr, ok := b.(facade.KeyReader)
	if !ok {
		t.Fatal("bus does not implement facade.KeyReader")
	}
	keys := []string{"host:name:1234", "a.b", "with space", "slash/and\\back", "ünï✓", "%41", "*", ">"}
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{})
	for round := range 2 {
		for i, k := range keys {
			publish(t, b, topic, fmt.Sprintf(`{"n":%d}`, round*100+i), facade.PublishOptions{Key: k})
		}
	}
	for _, r := range c.take(t, 2*len(keys)) {
		if !slices.Contains(keys, r.e.Key) {
			t.Fatalf("delivered key %q", r.e.Key)
		}
		if r.e.Topic != topic {
			t.Fatalf("keyed event topic %q", r.e.Topic)
		}
	}
	latest, err := kr.LatestByKey(t.Context(), topic, append(slices.Clone(keys), "missing"))
	if err != nil {
		t.Fatal(err)
	}
	if len(latest) != len(keys) {
		t.Fatalf("latest has %d keys, want %d", len(latest), len(keys))
	}
	for i, k := range keys {
		e := latest[k]
		if e == nil || e.Key != k || num(t, e) != 100+i {
			t.Fatalf("latest of %q: %+v", k, e)
		}
	}
}

func testInteropIn(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c1, c2 := newCollector(), newCollector()
	// One handler at a time, so both groups see the same order.
	subscribe(t, b, topic, group+"-1", c1.handle, facade.SubscribeOptions{MaxInFlight: 1})
	subscribe(t, b, topic, group+"-2", c2.handle, facade.SubscribeOptions{MaxInFlight: 1})
	native := env.Native(t)
	before := time.Now().Add(-time.Second)
	if err := native.Publish(t.Context(), topic, []byte(`{"plain":true}`)); err != nil {
		t.Fatal(err)
	}
	if err := native.Publish(t.Context(), topic, []byte("not json")); err != nil {
		t.Fatal(err)
	}
	// Matched by payload: an implementation may hand a group's events to
	// its handler in another order than the other group's.
	r1, r2 := c1.take(t, 2), c2.take(t, 2)
	byPayload := func(a, b received) int { return bytes.Compare(a.e.Payload, b.e.Payload) }
	slices.SortFunc(r1, byPayload)
	slices.SortFunc(r2, byPayload)
	for i := range 2 {
		e := r1[i].e
		if e.ID == "" || e.ID != r2[i].e.ID {
			t.Fatalf("plain message ids %q / %q: not stable", e.ID, r2[i].e.ID)
		}
		if e.Topic != topic || time.UnixMilli(e.TS).Before(before) {
			t.Fatalf("plain message envelope %+v", e)
		}
	}
	if string(r1[0].e.Payload) != `"not json"` || string(r1[1].e.Payload) != `{"plain":true}` {
		t.Fatalf("payloads %s, %s", r1[0].e.Payload, r1[1].e.Payload)
	}
	plain, notJSON := r1[1].e, r1[0].e
	if !env.Features.NoCursors {
		// The synthesised id resolves back to the message.
		if err := b.SetCursor(t.Context(), topic, group+"-3", facade.CursorPosition{LastID: plain.ID}); err != nil {
			t.Fatal(err)
		}
		c3 := newCollector()
		subscribe(t, b, topic, group+"-3", c3.handle, facade.SubscribeOptions{})
		if got := c3.next(t).e; got.ID != notJSON.ID {
			t.Fatalf("after synthesised id: %s", got.Payload)
		}
	}
}

func testInteropOut(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, _ := names(t)
	e := publish(t, b, topic, `{"hello":"nats"}`, facade.PublishOptions{Key: "k:1", Tags: []string{"t"}})
	next := env.Native(t).Follow(t, topic)
	msg, err := next()
	if err != nil {
		t.Fatal(err)
	}
	// The event id is in the hub's id header; Nats-Msg-Id, where present,
	// carries the same id (a caller's id, or a publish the hub may retry).
	// An event without either (an id the hub made for a publish that
	// cannot be sent twice) has the position id of its topic, Eventhub-Ts
	// and stream sequence, which a plain consumer derives as docs/nats.md
	// describes.
	id := msg.Get("Eventhub-Id")
	if id == "" && msg.Get("Nats-Msg-Id") == "" {
		ts, err := strconv.ParseInt(msg.Get("Eventhub-Ts"), 10, 64)
		if err != nil {
			t.Fatalf("plain consumer saw headers %v: no id and no time", msg.Header)
		}
		id = positionID(topic, ts, msg.Seq)
	}
	if string(msg.Data) != `{"hello":"nats"}` || id != e.ID || msg.Get("Eventhub-Ts") != fmt.Sprint(e.TS) ||
		(msg.Get("Nats-Msg-Id") != "" && msg.Get("Nats-Msg-Id") != e.ID) ||
		msg.Subject != topic+"._k.k:1" || msg.Get("Eventhub-Tags") != `["t"]` {
		t.Fatalf("plain consumer saw subject %s data %s headers %v (id %s), event %s", msg.Subject, msg.Data, msg.Header, id, e.ID)
	}
	// An id of the caller's is JetStream's idempotency key too.
	own := publish(t, b, topic, `{"hello":"again"}`, facade.PublishOptions{Key: "k:2", ID: "interop-" + e.ID})
	msg, err = next()
	if err != nil {
		t.Fatal(err)
	}
	if msg.Get("Eventhub-Id") != own.ID || msg.Get("Nats-Msg-Id") != own.ID {
		t.Fatalf("plain consumer saw headers %v for an event with the caller's id %s", msg.Header, own.ID)
	}
}

// positionID derives the id of an event stored without one, as
// docs/nats.md (Interoperability) tells a plain consumer to: a uuidv7 of
// the event's ts whose rand_a field is 0xC followed by the top 8 bits of a
// 30-bit FNV-1a hash of the topic, and whose rand_b field is the other 22
// bits of the hash followed by the low 40 bits of the stream sequence.
func positionID(topic string, ts int64, seq uint64) string {
	h := uint32(2166136261)
	for i := 0; i < len(topic); i++ {
		h ^= uint32(topic[i])
		h *= 16777619
	}
	h &= 1<<30 - 1
	var u [16]byte
	binary.BigEndian.PutUint64(u[0:8], uint64(ts)<<16|0x7<<12|0xC<<8|uint64(h>>22))
	binary.BigEndian.PutUint64(u[8:16], 0x2<<62|uint64(h&(1<<22-1))<<40|seq&(1<<40-1))
	x := hex.EncodeToString(u[:])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

func testRestart(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	c := newCollector()
	subscribe(t, b, topic, group, c.handle, facade.SubscribeOptions{From: facade.FromEarliest})
	sent := publishN(t, b, topic, 5)
	c.take(t, 5)
	testutil.CheckFor(t, waitTimeout, func() error {
		cur, err := b.GetCursor(t.Context(), topic, group)
		if err != nil {
			return err
		}
		if cur.LastID != sent[4].ID {
			return fmt.Errorf("cursor %+v", cur)
		}
		return nil
	})
	env.Restart(t)
	b2 := env.NewBus(t)
	cur, err := b2.GetCursor(t.Context(), topic, group)
	if err != nil {
		t.Fatal(err)
	}
	if cur.LastID != sent[4].ID {
		t.Fatalf("cursor after restart %+v", cur)
	}
	c2 := newCollector()
	subscribe(t, b2, topic, group, c2.handle, facade.SubscribeOptions{})
	e := publish(t, b2, topic, `{"n":5}`, facade.PublishOptions{})
	if got := c2.next(t).e; got.ID != e.ID {
		t.Fatalf("after restart the group resumed at %s", got.Payload)
	}
	c3 := newCollector()
	subscribe(t, b2, topic, group+"-fresh", c3.handle, facade.SubscribeOptions{From: facade.FromEarliest})
	if got := nums(t, c3.take(t, 6)); !slices.Equal(got, seq(0, 6)) {
		t.Fatalf("events after restart: %v", got)
	}
}

// familyNames derives a topic prefix below env.Family and a group unique to
// the test.
func familyNames(t testing.TB, env Env) (prefix, group string) {
	topic, group := names(t)
	return env.Family + "." + strings.TrimPrefix(topic, "conf."), group
}

// topicsOf returns the sorted topics of deliveries.
func topicsOf(rs []received) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.e.Topic
	}
	slices.Sort(out)
	return out
}

func testWildcardFamily(t *testing.T, env Env) {
	b := env.NewBus(t)
	p, group := familyNames(t, env)
	one, many := newCollector(), newCollector()
	subscribe(t, b, p+".*", group+"-one", one.handle, facade.SubscribeOptions{})
	subscribe(t, b, p+".**", group+"-many", many.handle, facade.SubscribeOptions{})
	publish(t, b, p+".a", `{"n":1}`, facade.PublishOptions{})
	publish(t, b, p+".b", `{"n":2}`, facade.PublishOptions{Key: "k1"})
	publish(t, b, p+".a.deep", `{"n":3}`, facade.PublishOptions{})
	// Dead letters do not come back to a pattern's group.
	publish(t, b, p+".a.dlq", `{"n":4}`, facade.PublishOptions{})
	publish(t, b, p+".b", `{"n":5}`, facade.PublishOptions{})

	got := one.take(t, 3)
	if ts := topicsOf(got); !slices.Equal(ts, []string{p + ".a", p + ".b", p + ".b"}) {
		t.Fatalf("%s.* delivered topics %v", p, ts)
	}
	if ns := nums(t, got); !slices.Equal(ns, []int{1, 2, 5}) {
		t.Fatalf("%s.* delivered %v", p, ns)
	}
	for _, r := range got {
		if num(t, r.e) == 2 && r.e.Key != "k1" {
			t.Fatalf("keyed event delivered with key %q", r.e.Key)
		}
	}
	got = many.take(t, 4)
	if ts := topicsOf(got); !slices.Equal(ts, []string{p + ".a", p + ".a.deep", p + ".b", p + ".b"}) {
		t.Fatalf("%s.** delivered topics %v", p, ts)
	}
	one.quiet(t, 200*time.Millisecond)
	many.quiet(t, 0)

	// A dead-letter pattern reads the dead letters.
	dl := newCollector()
	subscribe(t, b, p+".*.dlq", group+"-dlq", dl.handle, facade.SubscribeOptions{From: facade.FromEarliest})
	if r := dl.next(t); r.e.Topic != p+".a.dlq" || num(t, r.e) != 4 {
		t.Fatalf("%s.*.dlq delivered %s %s", p, r.e.Topic, r.e.Payload)
	}
}

func testWildcardShares(t *testing.T, env Env) {
	b1, b2 := env.NewBus(t), env.NewBus(t)
	p, group := familyNames(t, env)
	const n = 100
	var mu sync.Mutex
	seen := map[string]int{}
	per := [2]atomic.Int64{}
	h := func(i int) facade.Handler {
		return func(_ context.Context, d facade.Delivery) error {
			mu.Lock()
			seen[d.Event().ID]++
			mu.Unlock()
			per[i].Add(1)
			time.Sleep(time.Millisecond) // a little work, so both members get some
			return nil
		}
	}
	subscribe(t, b1, p+".**", group, h(0), facade.SubscribeOptions{From: facade.FromEarliest, BatchSize: 10})
	subscribe(t, b2, p+".**", group, h(1), facade.SubscribeOptions{From: facade.FromEarliest, BatchSize: 10})
	for i := range n {
		publish(t, b1, fmt.Sprintf("%s.t%d", p, i%4), fmt.Sprintf(`{"n":%d}`, i), facade.PublishOptions{})
	}
	testutil.CheckFor(t, waitTimeout, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != n {
			return fmt.Errorf("%d of %d events delivered", len(seen), n)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("event %s delivered %d times to one group", id, k)
		}
	}
	if per[0].Load() == 0 || per[1].Load() == 0 {
		t.Fatalf("work not shared: %d / %d", per[0].Load(), per[1].Load())
	}
}

// testWildcardFanIn: patterns and topics mix in SubscribeOptions.Topics,
// and the group's cursor over a pattern survives its members.
func testWildcardFanIn(t *testing.T, env Env) {
	b := env.NewBus(t)
	p, group := familyNames(t, env)
	topic, _ := names(t)
	c := newCollector()
	sub := subscribe(t, b, "", group, c.handle, facade.SubscribeOptions{Topics: []string{topic, p + ".*"}})
	publish(t, b, topic, `{"n":1}`, facade.PublishOptions{})
	publish(t, b, p+".x", `{"n":2}`, facade.PublishOptions{})
	if ts := topicsOf(c.take(t, 2)); !slices.Equal(ts, []string{topic, p + ".x"}) && !slices.Equal(ts, []string{p + ".x", topic}) {
		t.Fatalf("fan-in with a pattern delivered topics %v", ts)
	}
	if err := sub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Published while no member runs: the group's cursor over the
	// pattern delivers them to the next member, and only them.
	publish(t, b, p+".y", `{"n":3}`, facade.PublishOptions{})
	publish(t, b, p+".x", `{"n":4}`, facade.PublishOptions{})
	c2 := newCollector()
	subscribe(t, env.NewBus(t), p+".*", group, c2.handle, facade.SubscribeOptions{From: facade.FromEarliest})
	if ns := nums(t, c2.take(t, 2)); !slices.Equal(ns, []int{3, 4}) {
		t.Fatalf("after restart of the member: %v", ns)
	}
	c2.quiet(t, 100*time.Millisecond)
}

// testWildcardRefused: a pattern over topics with streams of their own is
// refused with a message that says how to declare a family, and so is a
// pattern NATS cannot express; publishing to a pattern is refused too.
func testWildcardRefused(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, group := names(t)
	publish(t, b, topic+".a", `{"n":1}`, facade.PublishOptions{})
	publish(t, b, topic+".b", `{"n":2}`, facade.PublishOptions{})
	nop := func(context.Context, facade.Delivery) error { return nil }
	for _, pat := range []string{topic + ".*", topic + ".**"} {
		_, err := b.Subscribe(t.Context(), pat, group, nop, facade.SubscribeOptions{})
		if !errors.Is(err, facade.ErrBadTopic) || !strings.Contains(err.Error(), "family") {
			t.Errorf("subscribe %s over separate streams: err %v, want bad_topic saying how to declare a family", pat, err)
		}
	}
	for _, pat := range []string{topic + ".**.a", topic + ".>", topic + ".a*"} {
		if _, err := b.Subscribe(t.Context(), pat, group, nop, facade.SubscribeOptions{}); !errors.Is(err, facade.ErrBadTopic) {
			t.Errorf("subscribe %s: err %v, want bad_topic", pat, err)
		}
	}
	if _, err := b.Publish(t.Context(), topic+".**", json.RawMessage(`1`), facade.PublishOptions{}); !errors.Is(err, facade.ErrBadTopic) {
		t.Errorf("publish to a pattern: err %v, want bad_topic", err)
	}
	// The bus is still fine.
	c := newCollector()
	subscribe(t, b, topic+".a", group, c.handle, facade.SubscribeOptions{From: facade.FromEarliest})
	if n := num(t, c.next(t).e); n != 1 {
		t.Fatalf("after refusals: got n=%d", n)
	}
}

// testWildcardCursor: a group over a pattern has one cursor, read and
// moved with the pattern as its topic.
func testWildcardCursor(t *testing.T, env Env) {
	b := env.NewBus(t)
	cur, ok := b.(facade.Cursors)
	if !ok {
		t.Fatal("bus does not implement facade.Cursors")
	}
	p, group := familyNames(t, env)
	pattern := p + ".**"
	c := newCollector()
	sub := subscribe(t, b, pattern, group, c.handle, facade.SubscribeOptions{})
	publish(t, b, p+".a", `{"n":0}`, facade.PublishOptions{})
	publish(t, b, p+".b.c", `{"n":1}`, facade.PublishOptions{})
	last := publish(t, b, p+".a", `{"n":2}`, facade.PublishOptions{})
	if ns := nums(t, c.take(t, 3)); !slices.Equal(ns, []int{0, 1, 2}) {
		t.Fatalf("delivered %v", ns)
	}
	testutil.CheckFor(t, waitTimeout, func() error {
		pos, err := cur.GetCursor(t.Context(), pattern, group)
		if err != nil {
			return err
		}
		if pos.LastID != last.ID || pos.Pending != 0 {
			return fmt.Errorf("cursor at %s (pending %d), want %s (pending 0)", pos.LastID, pos.Pending, last.ID)
		}
		return nil
	})
	if err := sub.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Rewind the whole pattern's group to its beginning.
	if err := cur.SetCursor(t.Context(), pattern, group, facade.CursorPosition{}); err != nil {
		t.Fatalf("set cursor of %s: %v", pattern, err)
	}
	c2 := newCollector()
	subscribe(t, b, pattern, group, c2.handle, facade.SubscribeOptions{})
	got := c2.take(t, 3)
	if ns := nums(t, got); !slices.Equal(ns, []int{0, 1, 2}) {
		t.Fatalf("after rewinding: %v", ns)
	}
	if ts := topicsOf(got); !slices.Equal(ts, []string{p + ".a", p + ".a", p + ".b.c"}) {
		t.Fatalf("after rewinding, topics %v", ts)
	}
	c2.quiet(t, 100*time.Millisecond)
}

// testCompareAndSet: a publish with ExpectedLastSeq is stored only while
// the key's newest event is at that position (0: the key has none), and
// fails with ErrWrongLastSeq, storing nothing, once the key moved. Other
// keys of the topic do not move it.
func testCompareAndSet(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, _ := names(t)
	seq := func(n uint64) *uint64 { return &n }
	cas := func(payload string, key string, expected uint64) (*facade.EventRecord, error) {
		return b.Publish(t.Context(), topic, json.RawMessage(payload), facade.PublishOptions{Key: key, ExpectedLastSeq: seq(expected)})
	}
	first, err := cas(`{"v":1}`, "proc:a", 0)
	if err != nil {
		t.Fatalf("create with expected_last_seq 0: %v", err)
	}
	if _, err := cas(`{"v":"lost"}`, "proc:a", 0); !errors.Is(err, facade.ErrWrongLastSeq) {
		t.Fatalf("create of an existing key: %v, want wrong_last_seq", err)
	}
	second, err := cas(`{"v":2}`, "proc:a", first.Seq)
	if err != nil {
		t.Fatalf("update at the read position: %v", err)
	}
	if _, err := cas(`{"v":"lost"}`, "proc:a", first.Seq); !errors.Is(err, facade.ErrWrongLastSeq) {
		t.Fatalf("update at a stale position: %v, want wrong_last_seq", err)
	}
	publish(t, b, topic, `{"v":"other"}`, facade.PublishOptions{Key: "proc:b"})
	third, err := cas(`{"v":3}`, "proc:a", second.Seq)
	if err != nil {
		t.Fatalf("update after another key moved: %v", err)
	}
	if _, err := b.Publish(t.Context(), topic, json.RawMessage(`{}`), facade.PublishOptions{ExpectedLastSeq: seq(0)}); !errors.Is(err, facade.ErrInvalidOption) {
		t.Fatalf("expected_last_seq without a key: %v, want bad_request", err)
	}
	c := newCollector()
	subscribe(t, b, topic, "all", c.handle, facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: 1})
	var got []string
	for _, r := range c.take(t, 4) {
		got = append(got, string(r.e.Payload))
	}
	if want := []string{`{"v":1}`, `{"v":2}`, `{"v":"other"}`, `{"v":3}`}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q (a refused compare-and-set stores nothing)", got, want)
	}
	if kr, ok := b.(facade.KeyReader); ok {
		latest, err := kr.LatestByKey(t.Context(), topic, []string{"proc:a"})
		if err != nil {
			t.Fatal(err)
		}
		if e := latest["proc:a"]; e == nil || e.Seq != third.Seq {
			t.Fatalf("latest of proc:a %+v, want seq %d", e, third.Seq)
		}
	}
}

// testDeleteKey: a delete stores a tombstone (Deleted, null payload) that
// subscribers receive, latest-by-key and Latest then leave the key out, a
// compare-and-delete fails once the key moved, a key can be written again
// after its tombstone, and a purge leaves only the tombstone of the key's
// history.
func testDeleteKey(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, _ := names(t)
	kd, ok := b.(facade.KeyDeleter)
	if !ok {
		t.Fatal("bus does not implement facade.KeyDeleter")
	}
	publish(t, b, topic, `{"v":"a1"}`, facade.PublishOptions{Key: "a"})
	publish(t, b, topic, `{"v":"a2"}`, facade.PublishOptions{Key: "a"})
	b1 := publish(t, b, topic, `{"v":"b1"}`, facade.PublishOptions{Key: "b"})
	del, err := kd.DeleteKey(t.Context(), topic, "a", facade.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !del.Deleted || del.Key != "a" || del.ID == "" || del.Seq <= b1.Seq {
		t.Fatalf("tombstone %+v", del)
	}
	latestKeys := func() []string {
		t.Helper()
		var keys []string
		if kr, ok := b.(facade.KeyReader); ok {
			got, err := kr.LatestByKey(t.Context(), topic, []string{"a", "b", "c"})
			if err != nil {
				t.Fatal(err)
			}
			for k := range got {
				keys = append(keys, k)
			}
			slices.Sort(keys)
		}
		if ks, ok := b.(facade.KeyScanner); ok {
			var scanned []string
			if _, err := ks.Latest(t.Context(), topic, func(e *facade.EventRecord) error {
				scanned = append(scanned, e.Key)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			slices.Sort(scanned)
			if keys != nil && !slices.Equal(keys, scanned) {
				t.Fatalf("LatestByKey has %q, Latest %q", keys, scanned)
			}
			keys = scanned
		}
		return keys
	}
	if _, ok := b.(facade.KeyReader); ok {
		if got := latestKeys(); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("after deleting a, the newest events are of %q, want [b]", got)
		}
	}

	// Compare-and-delete, and a write after the tombstone.
	stale := b1.Seq - 1
	if _, err := kd.DeleteKey(t.Context(), topic, "b", facade.DeleteOptions{ExpectedLastSeq: &stale}); !errors.Is(err, facade.ErrWrongLastSeq) {
		t.Fatalf("delete at a stale position: %v, want wrong_last_seq", err)
	}
	if _, err := kd.DeleteKey(t.Context(), topic, "b", facade.DeleteOptions{ExpectedLastSeq: &b1.Seq}); err != nil {
		t.Fatalf("delete at the read position: %v", err)
	}
	publish(t, b, topic, `{"v":"a3"}`, facade.PublishOptions{Key: "a", ExpectedLastSeq: &del.Seq})

	// Purge: the history of c goes, its tombstone stays.
	publish(t, b, topic, `{"v":"c1"}`, facade.PublishOptions{Key: "c"})
	publish(t, b, topic, `{"v":"c2"}`, facade.PublishOptions{Key: "c"})
	if _, err := kd.DeleteKey(t.Context(), topic, "c", facade.DeleteOptions{Purge: true}); err != nil {
		t.Fatalf("delete with purge: %v", err)
	}
	if _, ok := b.(facade.KeyReader); ok {
		if got := latestKeys(); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("after deleting b and c and writing a again, the newest events are of %q, want [a]", got)
		}
	}
	c := newCollector()
	subscribe(t, b, topic, "all", c.handle, facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: 1})
	var got []string
	for _, r := range c.take(t, 7) {
		s := r.e.Key + "=" + string(r.e.Payload)
		if r.e.Deleted {
			s = r.e.Key + " deleted"
			if string(r.e.Payload) != "null" {
				t.Fatalf("tombstone payload %s, want null", r.e.Payload)
			}
		}
		got = append(got, s)
	}
	want := []string{`a={"v":"a1"}`, `a={"v":"a2"}`, `b={"v":"b1"}`, "a deleted", "b deleted", `a={"v":"a3"}`, "c deleted"}
	if !slices.Equal(got, want) {
		t.Fatalf("the topic holds %q, want %q", got, want)
	}

	// Bad input.
	if _, err := kd.DeleteKey(t.Context(), topic, "", facade.DeleteOptions{}); !errors.Is(err, facade.ErrBadKey) {
		t.Fatalf("delete without a key: %v, want bad_key", err)
	}
	if _, err := kd.DeleteKey(t.Context(), "Bad Topic", "a", facade.DeleteOptions{}); !errors.Is(err, facade.ErrBadTopic) {
		t.Fatalf("delete on a bad topic: %v, want bad_topic", err)
	}
	if _, err := kd.DeleteKey(t.Context(), topic+".none", "a", facade.DeleteOptions{}); !errors.Is(err, facade.ErrNotFound) {
		t.Fatalf("delete on a topic without a stream: %v, want not_found", err)
	}
}

// testKeyTTL: an event published with TTLSeconds is removed once its time
// is up (latest-by-key then leaves its key out), one without stays; a
// negative TTL is refused.
func testKeyTTL(t *testing.T, env Env) {
	b := env.NewBus(t)
	topic, _ := names(t)
	publish(t, b, topic, `{"status":"alive"}`, facade.PublishOptions{Key: "p1", TTLSeconds: 1})
	publish(t, b, topic, `{"status":"alive"}`, facade.PublishOptions{Key: "p2"})
	if _, err := b.Publish(t.Context(), topic, json.RawMessage(`{}`), facade.PublishOptions{Key: "p3", TTLSeconds: -1}); !errors.Is(err, facade.ErrInvalidOption) {
		t.Fatalf("negative ttl: %v, want bad_request", err)
	}
	kr, ok := b.(facade.KeyReader)
	if !ok {
		return // expiry is observed through latest-by-key
	}
	testutil.CheckFor(t, 15*time.Second, func() error {
		got, err := kr.LatestByKey(t.Context(), topic, []string{"p1", "p2"})
		if err != nil {
			return err
		}
		if got["p2"] == nil {
			return errors.New("p2, published without a ttl, is gone")
		}
		if got["p1"] != nil {
			return errors.New("p1 has not expired yet")
		}
		return nil
	})
}
