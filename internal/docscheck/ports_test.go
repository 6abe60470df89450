package docscheck

import (
	"strings"
	"testing"
)

// TestScriptPorts: each documented port becomes its free port once; a free
// port that begins like another documented port (42221 and 4222) is not
// replaced again.
func TestScriptPorts(t *testing.T) {
	e := &docsEnv{ports: map[string]int{"8081": 42225, "8082": 38222, "8090": 42221, "4222": 34222}}
	got := e.script([]string{"curl http://127.0.0.1:8090/publish/a http://localhost:8081/sse/b nats://127.0.0.1:4222 127.0.0.1:8082\n"}, nil)
	want := "curl http://127.0.0.1:42221/publish/a http://localhost:42225/sse/b nats://127.0.0.1:34222 127.0.0.1:38222\n"
	if !strings.Contains(got, want) {
		t.Fatalf("script:\n%s\nwant the line\n%s", got, want)
	}
}
