package browser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/eventhub/eventhub/facade"
)

// processState is the payload of process.state (seeds part 2, section 4).
type processState struct {
	ProcessID  string  `json:"processId"`
	Name       string  `json:"name"`
	Host       string  `json:"host"`
	PID        int     `json:"pid"`
	SID        string  `json:"sid,omitempty"`
	CPUPct     float64 `json:"cpu_pct"`
	MemMB      float64 `json:"mem_mb"`
	LastSeenTS int64   `json:"last_seen_ts"`
	Status     string  `json:"status"`
}

func newProcess(host, name string, pid int, cpu, mem float64, status string) processState {
	return processState{
		ProcessID: fmt.Sprintf("%s:%s:%d", host, name, pid),
		Name:      name, Host: host, PID: pid,
		CPUPct: cpu, MemMB: mem,
		LastSeenTS: time.Now().UnixMilli(),
		Status:     status,
	}
}

func (st *stack) publishState(t testing.TB, p processState) {
	t.Helper()
	st.publishJSON(t, "process.state", p, facade.PublishOptions{Key: p.ProcessID})
}

// rowJS is a JavaScript expression for the dashboard's row of a process.
func rowJS(processID string) string {
	return fmt.Sprintf(`document.querySelector('#processes tbody tr[data-process-id="' + CSS.escape(%s) + '"]')`, jsString(processID))
}

// TestDashboard loads the dashboard in Chromium against a real gateway, ops
// endpoints and embedded NATS on one origin, with authentication on.
func TestDashboard(t *testing.T) {
	const token = "dash-s3cret"
	st := newStack(t, token)

	// State before the page loads: two versions of one key, of which the
	// compacted topic keeps the newer.
	api := newProcess("host-a", "api", 101, 5, 120, "alive")
	st.publishState(t, api)
	api.CPUPct, api.MemMB = 7.5, 130
	st.publishState(t, api)

	// A Go member of a group on dash.test receives what the page's form publishes.
	received := make(chan *facade.EventRecord, 8)
	unsub, err := st.bus.Subscribe(t.Context(), "dash.test", "go-check", func(_ context.Context, dl facade.Delivery) error {
		e := dl.Event()
		select {
		case received <- e:
		default:
		}
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		t.Fatalf("subscribe dash.test: %v", err)
	}
	t.Cleanup(func() { _ = unsub.Stop(context.Background()) })

	b := newBrowser(t)
	b.do(t, "load the dashboard", chromedp.Navigate(st.srv.URL+"/"))

	// Without a token the gateway refuses the page, and the page says so.
	b.waitJS(t, "the refusal shown", `document.getElementById("conn").dataset.state === "closed" &&
		document.getElementById("conn").textContent.includes("bad_token")`)
	b.waitJS(t, "the ops refusal shown", `document.getElementById("topics-status").dataset.state === "error" &&
		document.getElementById("topics-status").textContent.includes("401")`)

	// With the token (typed into the form) it connects and shows the current state.
	b.do(t, "enter the token",
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS("#token-form button")),
	)
	b.waitJS(t, "connected", `document.getElementById("conn").dataset.state === "open"`)
	if got := eval[string](t, b, `sessionStorage.getItem("eventhub.token")`); got != token {
		t.Errorf("sessionStorage token = %q, want %q", got, token)
	}
	b.waitJS(t, "the current state of "+api.ProcessID, rowJS(api.ProcessID)+`?.cells[4].textContent === "7.5"`)

	// A new process appears as a row.
	worker := newProcess("host-b", "worker", 202, 42.25, 512, "alive")
	st.publishState(t, worker)
	b.waitJS(t, "the row of "+worker.ProcessID, rowJS(worker.ProcessID)+`?.dataset.status === "alive"`)
	cells := eval[[]string](t, b, `Array.from(`+rowJS(worker.ProcessID)+`.cells, c => c.textContent.trim())`)
	if len(cells) != 8 || cells[0] != worker.ProcessID || cells[1] != "host-b" || cells[2] != "worker" ||
		cells[3] != "202" || cells[4] != "42.3" || cells[5] != "512" || cells[7] != "alive" {
		t.Errorf("row of %s = %q", worker.ProcessID, cells)
	}
	if !eval[bool](t, b, rowJS(worker.ProcessID)+`.querySelector(".status").classList.contains("status-alive")`) {
		t.Error("alive status without the status-alive style")
	}

	// A change updates the same row in place.
	eval[bool](t, b, `(`+rowJS(worker.ProcessID)+`.dataset.marker = "same-row", true)`)
	worker.Status, worker.CPUPct = "stale", 0
	worker.LastSeenTS -= 30_000
	st.publishState(t, worker)
	b.waitJS(t, "the row of "+worker.ProcessID+" stale", rowJS(worker.ProcessID)+`?.dataset.status === "stale"`)
	if got := eval[string](t, b, rowJS(worker.ProcessID)+`.dataset.marker`); got != "same-row" {
		t.Errorf("the update replaced the row (marker %q)", got)
	}
	if !eval[bool](t, b, rowJS(worker.ProcessID)+`.querySelector(".status").classList.contains("status-stale") && `+
		rowJS(worker.ProcessID)+`.classList.contains("row-stale")`) {
		t.Error("stale status without the stale style")
	}
	ids := eval[[]string](t, b, `Array.from(document.querySelectorAll("#processes tbody tr"), r => r.dataset.processId)`)
	if want := []string{api.ProcessID, worker.ProcessID}; strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Errorf("rows %q, want %q (one per process, by host)", ids, want)
	}

	// A refused publish shows the gateway's error code.
	b.do(t, "publish to a bad topic",
		chromedp.SetValue(chromedp.ID("pub-topic"), "bad topic"),
		chromedp.SetValue(chromedp.ID("pub-payload"), `{"n": 0}`),
		chromedp.Click(chromedp.ID("pub-submit")),
	)
	b.waitJS(t, "the publish error", `document.getElementById("publish-result").dataset.state === "error" &&
		document.getElementById("publish-result").textContent.includes("bad_topic")`)

	// Publish from the page's form; the Go subscriber gets the event with
	// the id the page shows.
	b.do(t, "fill the publish form",
		chromedp.SetValue(chromedp.ID("pub-topic"), "dash.test"),
		chromedp.SetValue(chromedp.ID("pub-key"), "k-1"),
		chromedp.SetValue(chromedp.ID("pub-payload"), `{"from": "browser", "n": 1}`),
		chromedp.Click(chromedp.ID("pub-submit")),
	)
	b.waitJS(t, "the publish result", `document.getElementById("publish-result").dataset.state === "ok"`)
	shownID := eval[string](t, b, `document.getElementById("publish-result").dataset.id`)
	shownText := eval[string](t, b, `document.getElementById("publish-result").textContent`)
	if shownID == "" || !strings.Contains(shownText, shownID) {
		t.Errorf("publish result %q does not show the id %q", shownText, shownID)
	}
	select {
	case e := <-received:
		if e.ID != shownID {
			t.Errorf("Go subscriber got id %s, the page shows %s", e.ID, shownID)
		}
		var p map[string]any
		if err := json.Unmarshal(e.Payload, &p); err != nil || p["from"] != "browser" || p["n"] != float64(1) || e.Key != "k-1" {
			t.Errorf("Go subscriber got key %q payload %s (%v)", e.Key, e.Payload, err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the Go subscriber got nothing from the page's form")
	}

	// Topics and lag from the ops endpoints: the Go group on dash.test has
	// acknowledged everything; process.state has no group, since the page
	// follows it live (a snapshot, then live events).
	b.waitJS(t, "the lag of the Go group", `document.querySelector('#topics tr[data-topic="dash.test"][data-group="go-check"] td.lag')?.textContent === "0"`)
	b.waitJS(t, "process.state without groups", `Array.from(document.querySelectorAll("#topics tbody"))
		.some(tb => tb.rows[0].cells[0].textContent === "process.state" && tb.textContent.includes("no groups"))`)
	if g := st.groupsOf(t, "process.state"); len(g) != 0 {
		t.Errorf("opening the dashboard made consumer groups on process.state: %q", g)
	}

	// The connection dropped while a process changes and another appears:
	// after the reconnect the page shows both.
	unblock := st.dropSessions(t)
	b.waitJS(t, "the page reconnecting", `document.getElementById("conn").dataset.state === "reconnecting"`)
	api.Status, api.CPUPct = "stale", 0.5
	st.publishState(t, api)
	missed := newProcess("host-a", "missed", 55, 3, 33, "alive")
	st.publishState(t, missed)
	unblock()
	b.waitJS(t, "connected again", `document.getElementById("conn").dataset.state === "open"`)
	b.waitJS(t, "the change made while disconnected", rowJS(api.ProcessID)+`?.dataset.status === "stale"`)
	b.waitJS(t, "the process that appeared while disconnected", rowJS(missed.ProcessID)+`?.dataset.status === "alive"`)
	ids = eval[[]string](t, b, `Array.from(document.querySelectorAll("#processes tbody tr"), r => r.dataset.processId)`)
	if want := []string{api.ProcessID, missed.ProcessID, worker.ProcessID}; strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Errorf("rows after the reconnect %q, want %q (one per process, by host, name)", ids, want)
	}

	// More changes while disconnected than the gateway recovers at once
	// (here 1): the page starts over from a new snapshot.
	st.gwCfg.LiveRecoveryLimit = 1
	st.blocked.Store(true)
	st.restartGateway(t)
	b.waitJS(t, "the page reconnecting", `document.getElementById("conn").dataset.state === "reconnecting"`)
	api.Status, api.CPUPct = "alive", 2.5
	st.publishState(t, api)
	missed.Status = "stale"
	st.publishState(t, missed)
	late := newProcess("host-a", "late", 66, 4, 44, "alive")
	st.publishState(t, late)
	st.blocked.Store(false)
	b.waitJS(t, "every change after the incomplete recovery", rowJS(api.ProcessID)+`?.cells[4].textContent === "2.5" && `+
		rowJS(missed.ProcessID)+`?.dataset.status === "stale" && `+rowJS(late.ProcessID)+`?.dataset.status === "alive"`)
	b.waitJS(t, "connected again", `document.getElementById("conn").dataset.state === "open"`)
	ids = eval[[]string](t, b, `Array.from(document.querySelectorAll("#processes tbody tr"), r => r.dataset.processId)`)
	if want := []string{api.ProcessID, late.ProcessID, missed.ProcessID, worker.ProcessID}; strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Errorf("rows after the new snapshot %q, want %q", ids, want)
	}
	if g := st.groupsOf(t, "process.state"); len(g) != 0 {
		t.Errorf("the reconnects made consumer groups on process.state: %q", g)
	}

	// Lag that is not 0: a group that received nothing yet.
	st.publishJSON(t, "lagging.topic", map[string]int{"n": 1}, facade.PublishOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if err := st.bus.SetCursor(ctx, "lagging.topic", "behind", facade.CursorPosition{}); err != nil {
		t.Fatalf("create a lagging group: %v", err)
	}
	st.publishJSON(t, "lagging.topic", map[string]int{"n": 2}, facade.PublishOptions{})
	b.waitJS(t, "the lag of a lagging group", `document.querySelector('#topics tr[data-topic="lagging.topic"][data-group="behind"] td.lag')?.textContent === "2"`)

	// One more process, for the screenshot.
	sched := newProcess("host-a", "scheduler", 77, 1.2, 64, "alive")
	st.publishState(t, sched)
	b.waitJS(t, "the row of "+sched.ProcessID, rowJS(sched.ProcessID)+`?.dataset.status === "alive"`)

	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if _, err := png.Decode(bytes.NewReader(shot)); err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	// The project's artifacts/ is two levels above this package's directory.
	for _, dir := range []string{t.TempDir(), filepath.Join("..", "..", "artifacts")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "dashboard.png")
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}

	if p := b.problems(); len(p) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestDashboardDoesNotCreateProcessState: opening the dashboard before
// anything wrote process.state must not create the topic (its stream would
// not be the compacted one the projector needs); the page waits for it and
// subscribes once it exists.
func TestDashboardDoesNotCreateProcessState(t *testing.T) {
	st := newStack(t, "")
	b := newBrowser(t)
	b.do(t, "load the dashboard", chromedp.Navigate(st.srv.URL+"/"))
	b.waitJS(t, "the page waits for the topic", `document.getElementById("conn").dataset.state === "waiting" &&
		document.getElementById("conn").textContent.includes("does not exist yet")`)
	if _, err := st.bus.LookupTopic(t.Context(), "process.state"); !errors.Is(err, facade.ErrNotFound) {
		t.Fatalf("the dashboard created process.state (lookup: %v)", err)
	}
	p := newProcess("host-c", "late", 303, 1, 10, "alive")
	st.publishState(t, p)
	b.waitJS(t, "the row once the topic exists", rowJS(p.ProcessID)+`?.dataset.status === "alive"`)
}
