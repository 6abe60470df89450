package gateway

import (
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"zero value", Config{}, false},
		{"token", Config{Token: "t"}, false},
		{"token and authenticator", Config{Token: "t", Authenticator: testAuth}, true},
		{"origins", Config{AllowedOrigins: []string{"https://a.example.com", "http://localhost:3000", "*"}}, false},
		{"origin with path", Config{AllowedOrigins: []string{"https://a.example.com/app"}}, true},
		{"origin without scheme", Config{AllowedOrigins: []string{"a.example.com"}}, true},
		{"negative", Config{MaxInflightPerSub: -1}, true},
		{"ping above idle", Config{PingInterval: time.Minute, IdleTimeout: 30 * time.Second}, true},
		{"ack timeout above cap", Config{AckTimeout: time.Hour, MaxAckTimeout: time.Minute}, true},
		{"tiny frames", Config{MaxFrameBytes: 100}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err != nil) != tc.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
	if (Config{}).AuthConfigured() || !(Config{Token: "x"}).AuthConfigured() || !(Config{Authenticator: testAuth}).AuthConfigured() {
		t.Fatal("AuthConfigured")
	}
	d := Config{}.withDefaults()
	if d.MaxInflightPerSub != 100 || d.AckTimeout != 30*time.Second || d.AuthTimeout != 2*time.Second || d.MaxFrameBytes != 1<<20+64<<10 {
		t.Fatalf("defaults %+v", d)
	}
}
