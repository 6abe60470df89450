package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
)

var (
	testNow    = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	testSecret = []byte("0123456789abcdef0123456789abcdef-test-secret")
	octSecret  = []byte("symmetric-key-published-in-the-jwks-0123456789")
	testAud    = "eventhub"
	testIss    = "https://issuer.test"
)

// Keys are generated once per test binary: RSA generation is slow under
// -race.
var (
	rsaKeys = sync.OnceValue(func() [2]*rsa.PrivateKey {
		var ks [2]*rsa.PrivateKey
		for i := range ks {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			ks[i] = k
		}
		return ks
	})
	ecKey = sync.OnceValue(func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
	edKey = sync.OnceValue(func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
)

// jwk is one entry of a test JWKS; key is a public key or, for "oct", a
// []byte.
type jwk struct {
	kid string
	alg string
	key any
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (k jwk) marshal(tb testing.TB) map[string]any {
	tb.Helper()
	m := map[string]any{"kid": k.kid, "use": "sig"}
	if k.alg != "" {
		m["alg"] = k.alg
	}
	switch key := k.key.(type) {
	case *rsa.PublicKey:
		m["kty"], m["n"], m["e"] = "RSA", b64(key.N.Bytes()), b64(big.NewInt(int64(key.E)).Bytes())
	case *ecdsa.PublicKey:
		ecdh, err := key.ECDH()
		if err != nil {
			tb.Fatal(err)
		}
		raw := ecdh.Bytes() // 0x04 || X || Y
		m["kty"], m["crv"], m["x"], m["y"] = "EC", "P-256", b64(raw[1:33]), b64(raw[33:])
	case ed25519.PublicKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", b64(key)
	case []byte:
		m["kty"], m["k"] = "oct", b64(key)
	default:
		tb.Fatalf("unsupported key %T", k.key)
	}
	return m
}

// jwksServer serves a JWKS that tests can swap, counting fetches.
type jwksServer struct {
	*httptest.Server
	body atomic.Pointer[[]byte]
	hits atomic.Int64
}

func newJWKSServer(tb testing.TB, keys ...jwk) *jwksServer {
	tb.Helper()
	s := &jwksServer{}
	s.set(tb, keys...)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*s.body.Load())
	}))
	tb.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(tb testing.TB, keys ...jwk) {
	tb.Helper()
	set := map[string]any{"keys": []any{}}
	for _, k := range keys {
		set["keys"] = append(set["keys"].([]any), k.marshal(tb))
	}
	b, err := json.Marshal(set)
	if err != nil {
		tb.Fatal(err)
	}
	s.body.Store(&b)
}

func defaultJWKS() []jwk {
	return []jwk{
		{"rsa1", "RS256", &rsaKeys()[0].PublicKey},
		{"ec1", "ES256", &ecKey().PublicKey},
		{"ed1", "EdDSA", edKey().Public()},
		{"oct1", "HS256", octSecret},
		{"ec-noalg", "", &ecKey().PublicKey},
	}
}

func newTestVerifier(tb testing.TB, cfg VerifierConfig) *Verifier {
	tb.Helper()
	if cfg.TimeFunc == nil {
		cfg.TimeFunc = func() time.Time { return testNow }
	}
	v, err := NewVerifier(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("NewVerifier: %v", err)
	}
	tb.Cleanup(v.Close)
	return v
}

// claims returns valid default claims, modified by mods.
func claims(mods ...func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{
		"sub":    "device-42",
		"aud":    testAud,
		"iss":    testIss,
		"iat":    testNow.Unix(),
		"exp":    testNow.Add(time.Hour).Unix(),
		"scopes": []string{"publish:heartbeat.*"},
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

func set(k string, v any) func(jwt.MapClaims) { return func(c jwt.MapClaims) { c[k] = v } }
func del(k string) func(jwt.MapClaims)        { return func(c jwt.MapClaims) { delete(c, k) } }

func sign(tb testing.TB, m jwt.SigningMethod, kid string, key any, c jwt.Claims) string {
	tb.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		tb.Fatalf("sign: %v", err)
	}
	return s
}

func rsaPublicPEM(tb testing.TB) []byte {
	tb.Helper()
	der, err := x509.MarshalPKIXPublicKey(&rsaKeys()[0].PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestVerifyValid(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS()...)
	hs := newTestVerifier(t, VerifierConfig{Secret: testSecret, Audience: testAud, Issuer: testIss})
	js := newTestVerifier(t, VerifierConfig{JWKSURL: srv.URL, Audience: testAud, Issuer: testIss})
	both := newTestVerifier(t, VerifierConfig{Secret: testSecret, JWKSURL: srv.URL})

	tests := []struct {
		name       string
		v          *Verifier
		token      string
		wantScopes []string
		allowed    string // a topic publish must be allowed on
		denied     string // a topic publish must be denied on
	}{
		{"HS256 scopes array", hs, sign(t, jwt.SigningMethodHS256, "", testSecret, claims()),
			[]string{"publish:heartbeat.*"}, "heartbeat.received", "process.state"},
		{"HS256 OAuth scope string", hs, sign(t, jwt.SigningMethodHS256, "", testSecret, claims(del("scopes"), set("scope", "publish:a.* subscribe:b.**"))),
			[]string{"publish:a.*", "subscribe:b.**"}, "a.x", "heartbeat.received"},
		{"HS256 OAuth scope with foreign scopes", hs, sign(t, jwt.SigningMethodHS256, "", testSecret, claims(del("scopes"), set("scope", "openid profile publish:a.*"))),
			[]string{"openid", "profile", "publish:a.*"}, "a.x", "heartbeat.received"},
		{"HS256 scopes string and scope array merged", hs, sign(t, jwt.SigningMethodHS256, "", testSecret, claims(set("scopes", "publish:a.* publish:b.*"), set("scope", []string{"publish:b.*", "publish:c.*"}))),
			[]string{"publish:a.*", "publish:b.*", "publish:c.*"}, "c.x", "d.x"},
		{"HS256 within leeway", hs, sign(t, jwt.SigningMethodHS256, "", testSecret, claims(set("exp", testNow.Add(-3*time.Second).Unix()), set("nbf", testNow.Add(3*time.Second).Unix()))),
			[]string{"publish:heartbeat.*"}, "heartbeat.x", "a"},
		{"HS256 policy beats scopes", hs, sign(t, jwt.SigningMethodHS256, "", testSecret, claims(set("policy", acl.Policy{Rules: []acl.Rule{aclAllow(acl.ActionPublish, "only.this")}}))),
			[]string{"publish:heartbeat.*"}, "only.this", "heartbeat.received"},
		{"HS256 null policy falls back to scopes", hs, sign(t, jwt.SigningMethodHS256, "", testSecret, claims(set("policy", nil))),
			[]string{"publish:heartbeat.*"}, "heartbeat.received", "only.this"},
		{"RS256 from JWKS", js, sign(t, jwt.SigningMethodRS256, "rsa1", rsaKeys()[0], claims()),
			[]string{"publish:heartbeat.*"}, "heartbeat.received", "x"},
		{"RS256 without kid", js, sign(t, jwt.SigningMethodRS256, "", rsaKeys()[0], claims()),
			[]string{"publish:heartbeat.*"}, "heartbeat.received", "x"},
		{"ES256 from JWKS", js, sign(t, jwt.SigningMethodES256, "ec1", ecKey(), claims()),
			[]string{"publish:heartbeat.*"}, "heartbeat.received", "x"},
		{"EdDSA from JWKS", js, sign(t, jwt.SigningMethodEdDSA, "ed1", edKey(), claims()),
			[]string{"publish:heartbeat.*"}, "heartbeat.received", "x"},
		{"HS256 on secret+JWKS verifier", both, sign(t, jwt.SigningMethodHS256, "", testSecret, claims(del("aud"), del("iss"))),
			[]string{"publish:heartbeat.*"}, "heartbeat.received", "x"},
		{"RS256 on secret+JWKS verifier", both, sign(t, jwt.SigningMethodRS256, "rsa1", rsaKeys()[0], claims()),
			[]string{"publish:heartbeat.*"}, "heartbeat.received", "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.v.Verify(context.Background(), tt.token)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if c.Subject != "device-42" || !c.ExpiresAt.Equal(testNow.Add(time.Hour)) && tt.name != "HS256 within leeway" {
				t.Errorf("claims = %+v", c)
			}
			if strings.Join(c.Scopes, " ") != strings.Join(tt.wantScopes, " ") {
				t.Errorf("Scopes = %q, want %q", c.Scopes, tt.wantScopes)
			}
			cp, err := c.CompiledPolicy()
			if err != nil {
				t.Fatal(err)
			}
			if !cp.Allowed(acl.ActionPublish, tt.allowed, "") || cp.Allowed(acl.ActionPublish, tt.denied, "") {
				t.Errorf("policy: %q allowed=%v, %q allowed=%v", tt.allowed, cp.Allowed(acl.ActionPublish, tt.allowed, ""), tt.denied, cp.Allowed(acl.ActionPublish, tt.denied, ""))
			}
		})
	}
}

func TestVerifyRejects(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS()...)
	hs := newTestVerifier(t, VerifierConfig{Secret: testSecret, Audience: testAud, Issuer: testIss})
	js := newTestVerifier(t, VerifierConfig{JWKSURL: srv.URL, Audience: testAud, Issuer: testIss})
	both := newTestVerifier(t, VerifierConfig{Secret: testSecret, JWKSURL: srv.URL, Audience: testAud, Issuer: testIss})

	hsTok := func(mods ...func(jwt.MapClaims)) string {
		return sign(t, jwt.SigningMethodHS256, "", testSecret, claims(mods...))
	}
	valid := hsTok()
	parts := strings.Split(valid, ".")
	otherPayload := strings.Split(hsTok(set("sub", "admin")), ".")[1]
	noneTok := sign(t, jwt.SigningMethodNone, "", jwt.UnsafeAllowNoneSignatureType, claims())
	// algorithm confusion: HS256 "signed" with the RSA public key as secret
	confused := sign(t, jwt.SigningMethodHS256, "rsa1", rsaPublicPEM(t), claims())
	otherRSA, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		v       *Verifier
		token   string
		wantErr error
	}{
		{"empty", hs, "", ErrTokenMissing},
		{"garbage", hs, "garbage", ErrTokenMalformed},
		{"garbage three parts", hs, "a.b.c", ErrTokenMalformed},
		{"bad json payload", hs, parts[0] + "." + b64([]byte("{nope")) + "." + parts[2], ErrTokenMalformed},
		{"too long", hs, strings.Repeat("a", MaxTokenLength+1), ErrTokenMalformed},
		{"policy claim of wrong type", hs, hsTok(set("policy", "allow everything")), acl.ErrBadPolicy},
		{"policy claim with unknown field", hs, hsTok(set("policy", map[string]any{"rules": []any{map[string]any{"effect": "allow", "action": "subscribe", "topics": []string{"a"}, "group": []string{"g"}}}})), acl.ErrBadPolicy},
		{"scopes claim of wrong type", hs, hsTok(set("scopes", 42)), ErrTokenMalformed},
		{"exp as a string", hs, hsTok(set("exp", fmt.Sprint(testNow.Add(time.Hour).Unix()))), ErrTokenMalformed},
		{"nbf as a string", hs, hsTok(set("nbf", fmt.Sprint(testNow.Unix()))), ErrTokenMalformed},
		{"iat as a string", hs, hsTok(set("iat", fmt.Sprint(testNow.Unix()))), ErrTokenMalformed},
		{"forged token with bad policy", hs, sign(t, jwt.SigningMethodHS256, "", []byte("another-secret-another-secret-123"), claims(set("policy", "x"))), ErrBadSignature},
		{"wrong audience", hs, hsTok(set("aud", "someone-else")), ErrBadAudience},
		{"missing audience", hs, hsTok(del("aud")), ErrBadAudience},
		{"empty audience", hs, hsTok(set("aud", "")), ErrBadAudience},
		{"audience list without ours", hs, hsTok(set("aud", []string{"a", "b"})), ErrBadAudience},
		{"empty issuer", hs, hsTok(set("iss", "")), ErrBadIssuer},
		{"wrong issuer", hs, hsTok(set("iss", "https://evil.test")), ErrBadIssuer},
		{"missing issuer", hs, hsTok(del("iss")), ErrBadIssuer},
		{"expired", hs, hsTok(set("exp", testNow.Add(-time.Minute).Unix())), ErrTokenExpired},
		{"not yet valid", hs, hsTok(set("nbf", testNow.Add(time.Minute).Unix())), ErrTokenNotYetValid},
		{"issued in the future", hs, hsTok(set("iat", testNow.Add(time.Minute).Unix())), ErrTokenNotYetValid},
		{"missing exp", hs, hsTok(del("exp")), ErrMissingExp},
		{"missing exp and wrong audience", hs, hsTok(del("exp"), set("aud", "x")), ErrMissingExp},
		{"wrong secret", hs, sign(t, jwt.SigningMethodHS256, "", []byte("another-secret-another-secret-123"), claims()), ErrBadSignature},
		{"tampered payload", hs, parts[0] + "." + otherPayload + "." + parts[2], ErrBadSignature},
		{"bad signature beats expiry", hs, sign(t, jwt.SigningMethodHS256, "", []byte("another-secret-another-secret-123"), claims(set("exp", 1))), ErrBadSignature},
		{"alg none", hs, noneTok, ErrBadAlgorithm},
		{"alg none on JWKS", js, noneTok, ErrBadAlgorithm},
		{"HS512 not in allowed list", hs, sign(t, jwt.SigningMethodHS512, "", testSecret, claims()), ErrBadAlgorithm},
		{"RS256 on HMAC-only verifier", hs, sign(t, jwt.SigningMethodRS256, "rsa1", rsaKeys()[0], claims()), ErrBadAlgorithm},
		{"alg confusion on JWKS verifier", js, confused, ErrBadAlgorithm},
		{"alg confusion on secret+JWKS verifier", both, confused, ErrBadSignature},
		{"JWKS oct key never used for HS256", js, sign(t, jwt.SigningMethodHS256, "oct1", octSecret, claims()), ErrBadAlgorithm},
		{"JWKS oct key never used on secret+JWKS", both, sign(t, jwt.SigningMethodHS256, "oct1", octSecret, claims()), ErrBadSignature},
		{"unknown kid", js, sign(t, jwt.SigningMethodRS256, "nope", rsaKeys()[0], claims()), ErrUnknownKey},
		{"kid of a key without alg of another type", js, sign(t, jwt.SigningMethodRS256, "ec-noalg", rsaKeys()[0], claims()), ErrUnknownKey},
		{"kid of another key type", js, sign(t, jwt.SigningMethodRS256, "ec1", rsaKeys()[0], claims()), ErrUnknownKey},
		{"RS256 signed by a foreign key", js, sign(t, jwt.SigningMethodRS256, "rsa1", otherRSA, claims()), ErrBadSignature},
		{"RS256 foreign key without kid", js, sign(t, jwt.SigningMethodRS256, "", otherRSA, claims()), ErrBadSignature},
		{"RS512 not in allowed list", js, sign(t, jwt.SigningMethodRS512, "rsa1", rsaKeys()[0], claims()), ErrBadAlgorithm},
		{"JWKS expired", js, sign(t, jwt.SigningMethodES256, "ec1", ecKey(), claims(set("exp", testNow.Add(-time.Hour).Unix()))), ErrTokenExpired},
		{"invalid policy claim", hs, hsTok(set("policy", acl.Policy{Rules: []acl.Rule{{Effect: "maybe", Action: acl.ActionPublish, Topics: []string{"a"}}}})), acl.ErrBadPolicy},
		{"invalid scope", hs, hsTok(set("scopes", []string{"publish:a*"})), acl.ErrBadPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.v.Verify(context.Background(), tt.token)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Verify error = %v, want %v", err, tt.wantErr)
			}
			if c != nil {
				t.Fatal("claims returned with an error")
			}
			var e *facade.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not a *facade.Error", err)
			}
			msg := err.Error()
			if (len(tt.token) > 8 && strings.Contains(msg, tt.token)) || strings.Contains(msg, string(testSecret)) {
				t.Fatalf("error message leaks the token or the secret: %q", msg)
			}
		})
	}
}

func TestVerifyJWKSRotation(t *testing.T) {
	ks := rsaKeys()
	srv := newJWKSServer(t, jwk{"k1", "RS256", &ks[0].PublicKey})
	v := newTestVerifier(t, VerifierConfig{JWKSURL: srv.URL})
	ctx := context.Background()
	if _, err := v.Verify(ctx, sign(t, jwt.SigningMethodRS256, "k1", ks[0], claims())); err != nil {
		t.Fatalf("k1: %v", err)
	}
	if got := srv.hits.Load(); got != 1 {
		t.Fatalf("JWKS fetched %d times at start, want 1 (keys must be cached)", got)
	}
	// the issuer rotates: k1 is withdrawn, k2 published
	srv.set(t, jwk{"k2", "RS256", &ks[1].PublicKey})
	if _, err := v.Verify(ctx, sign(t, jwt.SigningMethodRS256, "k2", ks[1], claims())); err != nil {
		t.Fatalf("rotated key k2: %v", err)
	}
	if got := srv.hits.Load(); got != 2 {
		t.Fatalf("JWKS fetched %d times, want 2 (one refresh for the unknown kid)", got)
	}
	// k1 is gone after the refresh, and further unknown kids are rate
	// limited: no fetch, and no waiting for the limiter (a Verify must not
	// block a connection for minutes)
	for _, tok := range []string{
		sign(t, jwt.SigningMethodRS256, "k1", ks[0], claims()),
		sign(t, jwt.SigningMethodRS256, "k3", ks[1], claims()),
		sign(t, jwt.SigningMethodRS256, "k3", ks[1], claims()),
	} {
		if err := verifyWithin(t, v, tok, 5*time.Second); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("unknown kid: error = %v, want ErrUnknownKey", err)
		}
	}
	if got := srv.hits.Load(); got != 2 {
		t.Fatalf("JWKS fetched %d times, want 2 (unknown-kid refresh must be rate limited)", got)
	}
}

// verifyWithin runs v.Verify and fails the test if it takes longer than d.
func verifyWithin(tb testing.TB, v *Verifier, token string, d time.Duration) error {
	tb.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := v.Verify(context.Background(), token)
		done <- err
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		tb.Fatalf("Verify blocked for more than %v", d)
		return nil
	}
}

// jwksRefreshGoroutines counts live jwkset refresh goroutines.
func jwksRefreshGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "jwkset.NewStorageFromHTTP.func")
}

// waitRefreshGoroutines waits until exactly want jwkset refresh goroutines
// are alive (goroutines of verifiers closed by earlier tests exit
// asynchronously).
func waitRefreshGoroutines(tb testing.TB, want int, why string) {
	tb.Helper()
	testutil.CheckFor(tb, 10*time.Second, func() error {
		if got := jwksRefreshGoroutines(); got != want {
			return fmt.Errorf("%s: %d JWKS refresh goroutines alive, want %d", why, got, want)
		}
		return nil
	})
}

// These two tests count goroutines process-wide, so they must not run in
// parallel with other tests creating verifiers (no test here is parallel).
func TestVerifierCloseStopsRefresh(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS()...)
	waitRefreshGoroutines(t, 0, "before start")
	v, err := NewVerifier(context.Background(), VerifierConfig{JWKSURL: srv.URL, TimeFunc: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if got := jwksRefreshGoroutines(); got != 1 {
		t.Fatalf("refresh goroutines = %d, want 1", got)
	}
	v.Close()
	v.Close() // idempotent
	waitRefreshGoroutines(t, 0, "Close did not stop the refresh")
	// cached keys still verify after Close
	if _, err := v.Verify(context.Background(), sign(t, jwt.SigningMethodRS256, "rsa1", rsaKeys()[0], claims())); err != nil {
		t.Fatalf("Verify after Close: %v", err)
	}
}

func TestNewVerifierJWKSUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	defer srv.Close()
	waitRefreshGoroutines(t, 0, "before start")
	v, err := NewVerifier(context.Background(), VerifierConfig{JWKSURL: srv.URL})
	if !errors.Is(err, ErrJWKSUnavailable) || v != nil {
		t.Fatalf("NewVerifier = %v, %v; want ErrJWKSUnavailable", v, err)
	}
	waitRefreshGoroutines(t, 0, "failed NewVerifier leaked its refresh goroutine")
}

func TestVerifierConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     VerifierConfig
		wantErr error
	}{
		{"secret", VerifierConfig{Secret: testSecret}, nil},
		{"jwks", VerifierConfig{JWKSURL: "https://idp.test/jwks.json"}, nil},
		{"both with algs", VerifierConfig{Secret: testSecret, JWKSURL: "http://idp.test/jwks", Algorithms: []string{"HS512", "PS256"}}, nil},
		{"nothing", VerifierConfig{}, ErrBadConfig},
		{"short secret", VerifierConfig{Secret: []byte("secret")}, ErrBadConfig},
		{"relative url", VerifierConfig{JWKSURL: "/jwks.json"}, ErrBadConfig},
		{"ftp url", VerifierConfig{JWKSURL: "ftp://idp.test/jwks"}, ErrBadConfig},
		{"bad url", VerifierConfig{JWKSURL: "http://[::1"}, ErrBadConfig},
		{"alg none", VerifierConfig{Secret: testSecret, Algorithms: []string{"none"}}, ErrBadConfig},
		{"unknown alg", VerifierConfig{Secret: testSecret, Algorithms: []string{"HS1"}}, ErrBadConfig},
		{"HS256 without secret", VerifierConfig{JWKSURL: "https://idp.test/jwks", Algorithms: []string{"HS256"}}, ErrBadConfig},
		{"RS256 without JWKS", VerifierConfig{Secret: testSecret, Algorithms: []string{"RS256"}}, ErrBadConfig},
		{"negative leeway", VerifierConfig{Secret: testSecret, Leeway: -time.Second}, ErrBadConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Validate() = %v, want %v", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), string(tt.cfg.Secret)) && len(tt.cfg.Secret) > 0 {
				t.Fatalf("error leaks the secret: %v", err)
			}
			if err == nil {
				return
			}
			if _, nerr := NewVerifier(context.Background(), tt.cfg); !errors.Is(nerr, tt.wantErr) {
				t.Fatalf("NewVerifier error = %v, want %v", nerr, tt.wantErr)
			}
		})
	}
	v := newTestVerifier(t, VerifierConfig{Secret: testSecret})
	if got := strings.Join(v.Algorithms(), ","); got != "HS256" {
		t.Fatalf("derived algorithms = %s", got)
	}
}

func TestMintHS256(t *testing.T) {
	v := newTestVerifier(t, VerifierConfig{Secret: testSecret, Audience: testAud, Issuer: testIss})
	pol := &acl.Policy{Rules: []acl.Rule{aclAllow(acl.ActionSubscribe, "process.**")}}
	tok, err := MintHS256(testSecret, MintClaims{
		Subject: "dev", Scopes: []string{"publish:heartbeat.*"}, Policy: pol,
		Audience: testAud, Issuer: testIss, TTL: time.Minute,
	}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatalf("minted token does not verify: %v", err)
	}
	cp, _ := c.CompiledPolicy()
	if c.Subject != "dev" || !c.ExpiresAt.Equal(testNow.Add(time.Minute)) || !c.IssuedAt.Equal(testNow) ||
		!cp.Allowed(acl.ActionSubscribe, "process.a", "") || cp.Allowed(acl.ActionPublish, "heartbeat.x", "") {
		t.Fatalf("claims = %+v", c)
	}
	// expiry is enforced against the verifier clock
	late := newTestVerifier(t, VerifierConfig{Secret: testSecret, TimeFunc: func() time.Time { return testNow.Add(2 * time.Minute) }})
	if _, err := late.Verify(context.Background(), tok); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("late verify error = %v, want ErrTokenExpired", err)
	}

	bad := []struct {
		name    string
		secret  []byte
		c       MintClaims
		wantErr error
	}{
		{"short secret", []byte("short"), MintClaims{TTL: time.Minute}, ErrBadConfig},
		{"zero ttl", testSecret, MintClaims{}, ErrBadConfig},
		{"bad scope", testSecret, MintClaims{TTL: time.Minute, Scopes: []string{"nope"}}, acl.ErrBadScope},
		{"bad policy", testSecret, MintClaims{TTL: time.Minute, Policy: &acl.Policy{Rules: []acl.Rule{{Effect: "x"}}}}, acl.ErrBadPolicy},
	}
	for _, tt := range bad {
		if _, err := MintHS256(tt.secret, tt.c, testNow); !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: error = %v, want %v", tt.name, err, tt.wantErr)
		}
	}
}

func BenchmarkVerifyHS256(b *testing.B) {
	v := newTestVerifier(b, VerifierConfig{Secret: testSecret, Audience: testAud, Issuer: testIss})
	tok := sign(b, jwt.SigningMethodHS256, "", testSecret, claims())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyRS256(b *testing.B) {
	srv := newJWKSServer(b, defaultJWKS()...)
	v := newTestVerifier(b, VerifierConfig{JWKSURL: srv.URL, Audience: testAud, Issuer: testIss})
	tok := sign(b, jwt.SigningMethodRS256, "rsa1", rsaKeys()[0], claims())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}

func TestVerifyConcurrent(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS()...)
	v := newTestVerifier(t, VerifierConfig{Secret: testSecret, JWKSURL: srv.URL})
	toks := []string{
		sign(t, jwt.SigningMethodHS256, "", testSecret, claims()),
		sign(t, jwt.SigningMethodRS256, "rsa1", rsaKeys()[0], claims()),
		sign(t, jwt.SigningMethodES256, "ec1", ecKey(), claims()),
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 30 {
				c, err := v.Verify(context.Background(), toks[(g+i)%len(toks)])
				if err != nil {
					errs <- err
					return
				}
				cp, _ := c.CompiledPolicy()
				if !cp.Allowed(acl.ActionPublish, "heartbeat.received", "") {
					errs <- errors.New("policy denied")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestClaimsPolicyBeatsScopes(t *testing.T) {
	c := &Claims{
		Scopes: []string{"publish:a.*"},
		Policy: &acl.Policy{Rules: []acl.Rule{acl.Rule{Effect: acl.EffectAllow, Action: acl.ActionPublish, Topics: []string{"b.*"}}}},
	}
	cp, err := c.CompiledPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if cp.Allowed(acl.ActionPublish, "a.x", "") || !cp.Allowed(acl.ActionPublish, "b.x", "") {
		t.Fatal("the policy claim must beat the scopes")
	}
	// an empty embedded policy still beats scopes: deny all
	c.Policy = &acl.Policy{}
	if cp, err = c.CompiledPolicy(); err != nil || cp.Allowed(acl.ActionPublish, "a.x", "") {
		t.Fatalf("empty policy claim must deny all, got err=%v", err)
	}
	c.Policy = nil
	if cp, err = c.CompiledPolicy(); err != nil || !cp.Allowed(acl.ActionPublish, "a.x", "") {
		t.Fatalf("scopes must apply without a policy claim, got err=%v", err)
	}
	// foreign scopes (an identity provider's) are ignored
	c.Scopes = []string{"openid", "read:users", "publish:a.*", "profile"}
	if cp, err = c.CompiledPolicy(); err != nil || !cp.Allowed(acl.ActionPublish, "a.x", "") || cp.Allowed(acl.ActionSubscribe, "a.x", "") {
		t.Fatalf("foreign scopes must be ignored, got err=%v", err)
	}
	c.Scopes = []string{"openid", "publish:a..b"}
	if _, err = c.CompiledPolicy(); !errors.Is(err, acl.ErrBadPolicy) || !errors.Is(err, acl.ErrBadScope) {
		t.Fatalf("bad scope error = %v, want acl.ErrBadPolicy and acl.ErrBadScope", err)
	}
	var nilClaims *Claims
	if _, err = nilClaims.CompiledPolicy(); !errors.Is(err, acl.ErrBadPolicy) {
		t.Fatalf("nil claims error = %v", err)
	}
}

func TestClaimsContext(t *testing.T) {
	ctx := context.Background()
	c := &Claims{Subject: "s"}
	gc, ok := ClaimsFrom(WithClaims(ctx, c))
	if !ok || gc != c {
		t.Fatal("claims not round-tripped")
	}
	if _, ok := ClaimsFrom(ctx); ok {
		t.Fatal("empty context has claims")
	}
}

func aclAllow(action acl.Action, topics ...string) acl.Rule {
	return acl.Rule{Effect: acl.EffectAllow, Action: action, Topics: topics}
}
