package browser_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
)

// groupRowJS is the console's row of a group.
func groupRowJS(topic, group string) string {
	return fmt.Sprintf(`document.querySelector('#groups tr[data-topic=%s][data-group=%s]')`, jsString(topic), jsString(group))
}

// TestConsole drives the operator console in Chromium with authentication
// on: the refusal without a token, browsing events, redriving a dead letter
// that a group then consumes, seeking a group and pausing and resuming it.
func TestConsole(t *testing.T) {
	const token = "console-s3cret"
	st := newStack(t, token)
	ctx := t.Context()

	// Three events and a group that has read none of them.
	var evs []*facade.EventRecord
	for i := range 3 {
		evs = append(evs, st.publishJSON(t, "con.orders", map[string]int{"n": i}, facade.PublishOptions{Key: fmt.Sprintf("k%d", i)}))
	}
	if err := st.bus.SetCursor(ctx, "con.orders", "billing", facade.CursorPosition{}); err != nil {
		t.Fatal(err)
	}
	// A dead letter on con.dl: a group whose handler always fails.
	failing, err := st.bus.Subscribe(ctx, "con.dl", "failing", func(context.Context, facade.Delivery) error {
		return errors.New("cannot handle this")
	}, facade.SubscribeOptions{From: facade.FromEarliest, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	bad := st.publishJSON(t, "con.dl", map[string]string{"order": "o-1"}, facade.PublishOptions{})
	testutil.CheckFor(t, waitTimeout, func() error {
		ti, err := st.bus.LookupTopic(ctx, "con.dl.dlq")
		if err != nil {
			return err
		}
		if info, err := ti.Stream.Info(ctx); err != nil || info.State.Msgs != 1 {
			return fmt.Errorf("dead letters: %v %v", info, err)
		}
		return nil
	})
	if err := failing.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// A worker group that consumes what is redriven.
	redriven := make(chan *facade.EventRecord, 4)
	worker, err := st.bus.Subscribe(ctx, "con.dl", "worker", func(_ context.Context, d facade.Delivery) error {
		redriven <- d.Event()
		return nil
	}, facade.SubscribeOptions{From: facade.FromLatest})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = worker.Stop(context.Background()) })

	b := newBrowser(t)
	b.do(t, "load the dashboard", chromedp.Navigate(st.srv.URL+"/"))
	b.waitJS(t, "the dashboard", `document.getElementById("console-link") !== null`)
	link := eval[string](t, b, `document.getElementById("console-link").href`)
	if link != st.srv.URL+"/console" {
		t.Fatalf("the dashboard links to %q, want %s/console", link, st.srv.URL)
	}
	b.do(t, "open the console", chromedp.Navigate(link))

	// Without a token the admin API refuses, and the page says so.
	b.waitJS(t, "the refusal shown", `document.getElementById("status").dataset.state === "closed" &&
		document.getElementById("status").textContent.includes("401")`)

	b.do(t, "enter the admin token",
		chromedp.SendKeys(chromedp.ID("admin-token"), token),
		chromedp.Click(chromedp.CSS("#token-form button")),
	)
	b.waitJS(t, "the admin API answers", `document.getElementById("status").dataset.state === "open"`)
	if got := eval[string](t, b, `sessionStorage.getItem("eventhub.adminToken")`); got != token {
		t.Errorf("sessionStorage admin token = %q, want %q", got, token)
	}
	b.waitJS(t, "the lag of billing", groupRowJS("con.orders", "billing")+`?.querySelector("td.lag").textContent === "3"`)
	b.waitJS(t, "a rate chart", `document.querySelector('#topics tr[data-topic="con.orders"] svg.spark') !== null`)

	// Browse the events and look at one as JSON.
	b.do(t, "browse con.orders",
		chromedp.SetValue(chromedp.ID("browse-topic"), "con.orders"),
		chromedp.Click(chromedp.ID("browse-submit")),
	)
	b.waitJS(t, "three events", `document.querySelectorAll("#events tbody tr").length === 3`)
	b.do(t, "open the second event", chromedp.Click(chromedp.CSS(`#events tbody tr[data-id="`+evs[1].ID+`"]`)))
	b.waitJS(t, "its JSON", `document.getElementById("event-json").textContent.includes(`+jsString(evs[1].ID)+`)`)
	shown := eval[string](t, b, `document.getElementById("event-json").textContent`)
	if !strings.Contains(shown, `"key": "k1"`) || !strings.Contains(shown, `"headers"`) {
		t.Errorf("event JSON: %s", shown)
	}

	// The dead letter: redrive it; the worker group consumes it.
	b.do(t, "show the dead letters",
		chromedp.SetValue(chromedp.ID("dlq-topic"), "con.dl"),
		chromedp.Click(chromedp.ID("dlq-submit")),
	)
	b.waitJS(t, "the dead letter", `document.querySelector('#deadletters tbody tr[data-event-id=`+jsString(bad.ID)+`]')?.textContent.includes("cannot handle this")`)
	b.do(t, "redrive it", chromedp.Click(chromedp.CSS(`#deadletters tbody tr button.redrive`)))
	select {
	case e := <-redriven:
		if len(e.CausedBy) != 1 || e.CausedBy[0] != bad.ID || string(e.Payload) != string(bad.Payload) {
			t.Errorf("the worker got %+v, want the redriven %s", e, bad.ID)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("the worker got nothing after the redrive%s", b.consoleDump())
	}
	b.waitJS(t, "the dead letter gone", `document.querySelectorAll("#deadletters tbody tr").length === 0`)

	// Seek billing to the end (confirming), and its lag drops to 0.
	eval[bool](t, b, `(document.getElementById("action-result").textContent = "", true)`)
	b.do(t, "seek billing to latest", chromedp.Click(chromedp.CSS(`#groups tr[data-group="billing"] button.seek`)))
	b.waitJS(t, "the confirmation", `document.getElementById("confirm").open`)
	b.do(t, "confirm", chromedp.Click(chromedp.ID("confirm-ok")))
	b.waitJS(t, "the seek done", `document.getElementById("action-result").textContent !== "" &&
		!document.getElementById("confirm").open`)
	if got := eval[string](t, b, `document.getElementById("action-result").textContent`); got != "seek billing: done" {
		t.Fatalf("seek: %q", got)
	}
	b.waitJS(t, "lag 0", groupRowJS("con.orders", "billing")+`?.querySelector("td.lag").textContent === "0"`)
	cur, err := st.bus.GetCursor(ctx, "con.orders", "billing")
	if err != nil || cur.Pending != 0 {
		t.Errorf("billing after the seek: %+v %v", cur, err)
	}

	// Pause and resume.
	paused := func() bool {
		ti, err := st.bus.LookupTopic(ctx, "con.orders")
		if err != nil {
			t.Fatal(err)
		}
		c, err := ti.Stream.Consumer(ctx, ti.ConsumerName("billing"))
		if err != nil {
			t.Fatal(err)
		}
		return c.CachedInfo().Paused
	}
	b.do(t, "pause billing", chromedp.Click(chromedp.CSS(`#groups tr[data-group="billing"] button.pause`)))
	b.waitJS(t, "paused", groupRowJS("con.orders", "billing")+`?.querySelector("td.paused").textContent === "paused"`)
	if !paused() {
		t.Error("the page says paused, the consumer is not")
	}
	b.do(t, "resume billing", chromedp.Click(chromedp.CSS(`#groups tr[data-group="billing"] button.resume`)))
	b.waitJS(t, "running", groupRowJS("con.orders", "billing")+`?.querySelector("td.paused").textContent === "running"`)
	if paused() {
		t.Error("the page says running, the consumer is paused")
	}

	if p := b.problems(); len(p) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(p, "\n"))
	}
}
