package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// ErrCleanup is wrapped by the error of a run that could not delete what
// it created (its summary is still returned).
var ErrCleanup = errors.New("bench: cleanup")

// cleanup deletes, through the hub's admin API, what a run created: its
// topic (with the topic's groups), or, on a topic that was there before,
// its group. What was there before the run stays.
type cleanup struct {
	ops, token   string
	topic, group string
	newTopic     bool
	newGroup     bool
	hc           *http.Client
}

// planCleanup notes what exists before the run. It fails when the admin
// API cannot tell: without it the run could not clean up after itself.
func planCleanup(ctx context.Context, c Config) (*cleanup, error) {
	cl := &cleanup{ops: strings.TrimRight(c.OpsURL, "/"), token: c.Token, topic: c.Topic, group: c.Group,
		hc: &http.Client{Timeout: 10 * time.Second}}
	status, body, err := cl.call(ctx, http.MethodGet, "/admin/topics", url.Values{"topic": {c.Topic}})
	switch {
	case err != nil:
		return nil, err
	case status == http.StatusNotFound:
		cl.newTopic = true
		return cl, nil
	case status != http.StatusOK:
		return nil, fmt.Errorf("GET /admin/topics: %d %s", status, body)
	}
	if c.Consumers == 0 || c.Group == "" {
		return cl, nil
	}
	status, body, err = cl.call(ctx, http.MethodGet, "/admin/groups", url.Values{"topic": {c.Topic}})
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /admin/groups: %d %s", status, body)
	}
	var list struct {
		Groups []struct{ Group string }
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET /admin/groups: %w", err)
	}
	cl.newGroup = !slices.ContainsFunc(list.Groups, func(g struct{ Group string }) bool { return g.Group == c.Group })
	return cl, nil
}

// run deletes what the run created. It says what it deleted on w (nil:
// nothing said).
func (cl *cleanup) run(ctx context.Context, w io.Writer) error {
	var (
		q    = url.Values{"topic": {cl.topic}}
		what = "topic " + cl.topic
		path = "/admin/topics"
	)
	switch {
	case cl.newTopic:
	case cl.newGroup:
		q.Set("group", cl.group)
		what, path = "group "+cl.group+" of "+cl.topic, "/admin/groups"
	default:
		return nil
	}
	status, body, err := cl.call(ctx, http.MethodDelete, path, q)
	if err == nil && status != http.StatusOK && status != http.StatusNotFound {
		err = fmt.Errorf("DELETE %s: %d %s", path, status, body)
	}
	if err != nil {
		return fmt.Errorf("%w: delete the %s the run created: %w (-keep leaves it)", ErrCleanup, what, err)
	}
	if w != nil {
		fmt.Fprintf(w, "deleted the %s (created by the run; -keep leaves it)\n", what)
	}
	return nil
}

func (cl *cleanup) call(ctx context.Context, method, path string, q url.Values) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, cl.ops+path+"?"+q.Encode(), nil)
	if err != nil {
		return 0, nil, err
	}
	if cl.token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.token)
	}
	resp, err := cl.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, body, err
}
