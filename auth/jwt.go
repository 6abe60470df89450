package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/eventhub/eventhub/acl"
)

// Defaults and limits used by NewVerifier and MintHS256.
const (
	// DefaultLeeway is the clock-skew allowance applied to exp, nbf and iat
	// when VerifierConfig.Leeway is zero.
	DefaultLeeway = 5 * time.Second
	// DefaultJWKSRefreshInterval is the background JWKS refresh period when
	// VerifierConfig.JWKSRefreshInterval is zero.
	DefaultJWKSRefreshInterval = time.Hour
	// DefaultJWKSTimeout bounds each JWKS HTTP fetch when
	// VerifierConfig.JWKSTimeout is zero.
	DefaultJWKSTimeout = 10 * time.Second
	// MinSecretLength is the minimum HS256 secret length in bytes (RFC 7518
	// section 3.2: at least the hash size).
	MinSecretLength = 32
	// MaxTokenLength is the longest token Verify will parse; longer tokens
	// are rejected as ErrTokenMalformed before any decoding.
	MaxTokenLength = 64 << 10
)

var (
	hmacAlgs       = []string{"HS256", "HS384", "HS512"}
	asymmetricAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)

// Secret is a shared HMAC key; a configuration file holds it as a string.
type Secret []byte

// UnmarshalText sets s to a copy of text.
func (s *Secret) UnmarshalText(text []byte) error {
	*s = slices.Clone(text)
	return nil
}

// VerifierConfig configures a Verifier. At least one of Secret and JWKSURL
// must be set; both may be set (HMAC tokens are then checked with Secret,
// asymmetric ones with the JWKS, never the other way round).
type VerifierConfig struct {
	// Secret is the shared HMAC key of HS256/HS384/HS512 tokens, at least
	// 32 bytes (MinSecretLength). NewVerifier copies it.
	Secret Secret `yaml:"secret"`
	// JWKSURL is an http(s) URL serving the JSON Web Key Set of
	// RS*/PS*/ES*/EdDSA tokens. Keys are cached, refreshed every
	// JWKSRefreshInterval, and on a token with an unknown kid at most once
	// per 5 minutes (later unknown kids fail at once, with ErrUnknownKey).
	// Use https in production.
	JWKSURL string `yaml:"jwksURL"`
	// JWKSHTTPClient fetches the JWKS; nil means http.DefaultClient.
	JWKSHTTPClient *http.Client `yaml:"-"`
	// JWKSRefreshInterval is the background refresh period; zero means
	// DefaultJWKSRefreshInterval.
	JWKSRefreshInterval time.Duration `yaml:"jwksRefreshInterval"`
	// JWKSTimeout bounds each JWKS fetch (including the initial one in
	// NewVerifier and unknown-kid refreshes during Verify); zero means
	// DefaultJWKSTimeout.
	JWKSTimeout time.Duration `yaml:"jwksTimeout"`
	// Audience, when set, must appear in the token's aud claim.
	Audience string `yaml:"audience"`
	// Issuer, when set, must equal the token's iss claim.
	Issuer string `yaml:"issuer"`
	// Leeway is the clock-skew allowance for exp, nbf and iat; zero means
	// DefaultLeeway. It cannot be negative.
	Leeway time.Duration `yaml:"leeway"`
	// Algorithms lists the accepted alg header values. Empty means derived:
	// HS256 if Secret is set, plus RS256, ES256 and EdDSA if JWKSURL is set.
	// "none" is never accepted; HS* needs Secret and the others need
	// JWKSURL.
	Algorithms []string `yaml:"algorithms"`
	// TimeFunc is the clock used for exp/nbf/iat; nil means time.Now.
	TimeFunc func() time.Time `yaml:"-"`
	// Logger receives background JWKS refresh failures; nil means
	// discard.
	Logger *slog.Logger `yaml:"-"`
}

// Validate reports whether the configuration is usable. Errors wrap
// ErrBadConfig. It does not contact the JWKS URL.
func (c VerifierConfig) Validate() error {
	hasSecret, hasJWKS := len(c.Secret) > 0, c.JWKSURL != ""
	if !hasSecret && !hasJWKS {
		return fmt.Errorf("%w: need Secret or JWKSURL", ErrBadConfig)
	}
	if hasSecret && len(c.Secret) < MinSecretLength {
		return fmt.Errorf("%w: Secret is %d bytes, need at least %d", ErrBadConfig, len(c.Secret), MinSecretLength)
	}
	if hasJWKS {
		u, err := url.Parse(c.JWKSURL)
		if err != nil {
			return fmt.Errorf("%w: JWKSURL does not parse", ErrBadConfig)
		}
		if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("%w: JWKSURL must be an absolute http(s) URL", ErrBadConfig)
		}
	}
	if c.Leeway < 0 || c.JWKSRefreshInterval < 0 || c.JWKSTimeout < 0 {
		return fmt.Errorf("%w: negative duration", ErrBadConfig)
	}
	for _, a := range c.Algorithms {
		switch {
		case slices.Contains(hmacAlgs, a):
			if !hasSecret {
				return fmt.Errorf("%w: algorithm %s needs Secret", ErrBadConfig, a)
			}
		case slices.Contains(asymmetricAlgs, a):
			if !hasJWKS {
				return fmt.Errorf("%w: algorithm %s needs JWKSURL", ErrBadConfig, a)
			}
		default:
			return fmt.Errorf("%w: algorithm %q not supported", ErrBadConfig, a)
		}
	}
	return nil
}

// algorithms returns the accepted algorithms, derived when not configured.
func (c VerifierConfig) algorithms() []string {
	if len(c.Algorithms) > 0 {
		return slices.Clone(c.Algorithms)
	}
	var algs []string
	if len(c.Secret) > 0 {
		algs = append(algs, "HS256")
	}
	if c.JWKSURL != "" {
		algs = append(algs, "RS256", "ES256", "EdDSA")
	}
	return algs
}

// Verifier verifies JWTs and turns them into Claims. It is safe for
// concurrent use by multiple goroutines. Call Close when done to stop the
// background JWKS refresh.
type Verifier struct {
	secret   []byte
	algs     []string
	audience string
	issuer   string
	leeway   time.Duration
	jwks     keyfunc.Keyfunc // nil without JWKSURL
	parser   *jwt.Parser

	cancel    context.CancelFunc
	closeOnce sync.Once
}

// NewVerifier validates cfg and builds a Verifier. With a JWKSURL it fetches
// the key set once (bounded by JWKSTimeout; failure returns an error
// wrapping ErrJWKSUnavailable) and starts a background refresh goroutine
// whose lifetime is bounded by ctx and by Close: pass a long-lived context
// (the server's root context), not a request- or startup-scoped one.
func NewVerifier(ctx context.Context, cfg VerifierConfig) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	leeway := cfg.Leeway
	if leeway == 0 {
		leeway = DefaultLeeway
	}
	now := cfg.TimeFunc
	if now == nil {
		now = time.Now
	}
	v := &Verifier{
		secret:   slices.Clone(cfg.Secret),
		algs:     cfg.algorithms(),
		audience: cfg.Audience,
		issuer:   cfg.Issuer,
		leeway:   leeway,
		cancel:   func() {},
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(v.algs),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(now),
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	v.parser = jwt.NewParser(opts...)

	if cfg.JWKSURL != "" {
		kf, cancel, err := newJWKS(ctx, cfg)
		if err != nil {
			return nil, err
		}
		v.jwks, v.cancel = kf, cancel
	}
	return v, nil
}

// newJWKS builds the keyfunc/v3 JWKS client and returns it with the cancel
// function that stops its refresh goroutine.
func newJWKS(ctx context.Context, cfg VerifierConfig) (keyfunc.Keyfunc, context.CancelFunc, error) {
	timeout := cfg.JWKSTimeout
	if timeout == 0 {
		timeout = DefaultJWKSTimeout
	}
	refresh := cfg.JWKSRefreshInterval
	if refresh == 0 {
		refresh = DefaultJWKSRefreshInterval
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	display := cfg.JWKSURL
	if u, err := url.Parse(cfg.JWKSURL); err == nil {
		display = u.Redacted()
	}
	failFirst := false
	override := keyfunc.Override{
		Client:      cfg.JWKSHTTPClient,
		HTTPTimeout: timeout,
		// Fail NewVerifier when the first fetch fails: a wrong URL should
		// not start a gateway that rejects every token.
		NoErrorReturnFirstHTTPReq: &failFirst,
		// The unknown-kid refresh waits at most this long for the rate
		// limiter (5 min period, so later unknown kids fail at once instead
		// of blocking) and for the fetch itself.
		RateLimitWaitMax: timeout,
		RefreshErrorHandlerFunc: func(string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				logger.WarnContext(ctx, "acl: JWKS refresh failed", "url", display, "error", err)
			}
		},
		RefreshInterval: refresh,
	}
	jctx, cancel := context.WithCancel(ctx)
	kf, err := keyfunc.NewDefaultOverrideCtx(jctx, []string{cfg.JWKSURL}, override)
	if err != nil {
		cancel()
		return nil, nil, errMsg(ErrJWKSUnavailable, "fetch JWKS from "+display, err)
	}
	return kf, cancel, nil
}

// Close stops the background JWKS refresh. It is idempotent and safe to
// call concurrently. Verify keeps working afterwards with the cached keys
// (an unknown kid may still trigger a rate-limited fetch bounded by the
// Verify context).
func (v *Verifier) Close() {
	v.closeOnce.Do(v.cancel)
}

// Algorithms returns the accepted alg values.
func (v *Verifier) Algorithms() []string { return slices.Clone(v.algs) }

// Claims is the result of verifying a token. Claims returned by Verify
// carry the policy compiled at verification time; treat them as read-only
// (later edits of Scopes or Policy are not reflected by acl.CompiledPolicy).
type Claims struct {
	// Subject is the sub claim.
	Subject string
	// Issuer is the iss claim.
	Issuer string
	// Audience is the aud claim.
	Audience []string
	// ID is the jti claim.
	ID string
	// ExpiresAt is the exp claim (always set on verified tokens).
	ExpiresAt time.Time
	// ValidUntil is when the verifier stops accepting the token: ExpiresAt
	// plus its clock-skew leeway. Sessions that the token opened end then,
	// on every way in.
	ValidUntil time.Time
	// NotBefore is the nbf claim, zero if absent.
	NotBefore time.Time
	// IssuedAt is the iat claim, zero if absent.
	IssuedAt time.Time
	// Scopes is the union, in order and without duplicates, of the
	// "scopes" claim (JSON array or space-separated string) and the OAuth
	// "scope" claim (space-separated string or JSON array).
	Scopes []string
	// Policy is the embedded "policy" claim, or nil. When non-nil it takes
	// precedence over Scopes (even when it has no rules: deny all).
	Policy *acl.Policy

	compiled *acl.CompiledPolicy
}

// CompiledPolicy returns the authorization policy of the claims: the
// compiled Policy claim if present, else the policy built by [acl.ScopesToPolicy]
// from the scopes addressed to eventhub (those starting "publish:",
// "subscribe:" or "*:"; other scopes such as "openid" are ignored; none:
// deny all). A malformed eventhub scope ("publish:a*") is an error. Claims returned by Verify carry it precompiled;
// for hand-built Claims it is compiled on each call. Errors wrap
// acl.ErrBadPolicy. Safe for concurrent use.
func (c *Claims) CompiledPolicy() (*acl.CompiledPolicy, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil claims", acl.ErrBadPolicy)
	}
	if c.compiled != nil {
		return c.compiled, nil
	}
	return acl.CompileClaims(c.Policy, c.Scopes)
}

// scopeList decodes a scope claim given either as a JSON array of strings
// or as a space-separated string.
type scopeList []string

// UnmarshalJSON implements json.Unmarshaler.
func (s *scopeList) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		*s = strings.Fields(str)
		return nil
	}
	var arr []string
	if err := json.Unmarshal(b, &arr); err != nil {
		return errors.New("scope claim must be a string or an array of strings")
	}
	*s = arr
	return nil
}

// tokenClaims is the JSON shape of the claims this package reads and
// writes.
type tokenClaims struct {
	jwt.RegisteredClaims
	Scopes scopeList `json:"scopes,omitempty"`
	Scope  scopeList `json:"scope,omitempty"`
	// Policy is decoded only after the signature has been verified.
	Policy json.RawMessage `json:"policy,omitempty"`
}

// UnmarshalJSON decodes the claims, refusing exp, nbf and iat that are not
// JSON numbers: RFC 7519 makes them NumericDates, and a quoted number
// ("exp": "1700000000") would otherwise be read as one.
func (tc *tokenClaims) UnmarshalJSON(b []byte) error {
	var dates struct {
		Exp json.RawMessage `json:"exp"`
		Nbf json.RawMessage `json:"nbf"`
		Iat json.RawMessage `json:"iat"`
	}
	if err := json.Unmarshal(b, &dates); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		raw  json.RawMessage
	}{{"exp", dates.Exp}, {"nbf", dates.Nbf}, {"iat", dates.Iat}} {
		if len(d.raw) > 0 && string(d.raw) != "null" && (d.raw[0] < '0' || d.raw[0] > '9') && d.raw[0] != '-' {
			return fmt.Errorf("claim %s is not a number (RFC 7519 NumericDate)", d.name)
		}
	}
	type plain tokenClaims
	return json.Unmarshal(b, (*plain)(tc))
}

// Verify parses and verifies token (the bare compact JWT, without a
// "Bearer " prefix) and returns its claims with the policy precompiled.
// ctx bounds an unknown-kid JWKS refresh. Every error is an *Error matching
// one of ErrTokenMissing, ErrTokenMalformed, ErrTokenExpired,
// ErrTokenNotYetValid, ErrBadSignature, ErrBadAlgorithm, ErrBadAudience,
// ErrBadIssuer, ErrMissingExp, ErrUnknownKey or acl.ErrBadPolicy (a validly
// signed token whose policy or scopes do not decode or compile). Claim
// values, including the policy, are checked only after the signature, so a
// forged token reports a signature, key or algorithm error; only a token
// that does not even decode (ErrTokenMalformed) is reported before.
func (v *Verifier) Verify(ctx context.Context, token string) (*Claims, error) {
	if token == "" {
		return nil, wrapErr(ErrTokenMissing, nil)
	}
	if len(token) > MaxTokenLength {
		return nil, errMsg(ErrTokenMalformed, "token too long", nil)
	}
	var tc tokenClaims
	tok, err := v.parser.ParseWithClaims(token, &tc, v.keyfunc(ctx))
	if err != nil {
		return nil, v.mapError(tok, &tc, err)
	}
	c := &Claims{
		Subject:  tc.Subject,
		Issuer:   tc.Issuer,
		Audience: slices.Clone([]string(tc.Audience)),
		ID:       tc.ID,
		Scopes:   mergeScopes(tc.Scopes, tc.Scope),
	}
	if len(tc.Policy) > 0 && string(tc.Policy) != "null" {
		c.Policy = new(acl.Policy)
		if err := json.Unmarshal(tc.Policy, c.Policy); err != nil {
			return nil, errMsg(acl.ErrBadPolicy, "token carries an undecodable policy", err)
		}
	}
	if tc.ExpiresAt != nil {
		c.ExpiresAt = tc.ExpiresAt.Time
		c.ValidUntil = c.ExpiresAt.Add(v.leeway)
	}
	if tc.NotBefore != nil {
		c.NotBefore = tc.NotBefore.Time
	}
	if tc.IssuedAt != nil {
		c.IssuedAt = tc.IssuedAt.Time
	}
	c.compiled, err = acl.CompileClaims(c.Policy, c.Scopes)
	if err != nil {
		return nil, errMsg(acl.ErrBadPolicy, "token carries an invalid policy or scopes", err)
	}
	return c, nil
}

// mergeScopes returns a followed by the elements of b not already present.
func mergeScopes(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for _, s := range slices.Concat(a, b) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// keyfunc returns the jwt.Keyfunc for one Verify call. It dispatches on the
// token's signing method so an HMAC token only ever gets the shared secret
// and an asymmetric token only ever gets a JWKS public key of the matching
// type (no algorithm confusion).
func (v *Verifier) keyfunc(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		key, err := v.key(ctx, t)
		if err != nil {
			return nil, &keyError{err}
		}
		return key, nil
	}
}

// keyError marks an error of the key lookup, which mapError reports as it
// is rather than as a golang-jwt error.
type keyError struct{ err error }

func (e *keyError) Error() string { return e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

// key selects the key of one token.
func (v *Verifier) key(ctx context.Context, t *jwt.Token) (any, error) {
	{
		alg := t.Method.Alg()
		if !slices.Contains(v.algs, alg) { // also enforced by WithValidMethods
			return nil, wrapErr(ErrBadAlgorithm, nil)
		}
		switch t.Method.(type) {
		case *jwt.SigningMethodHMAC:
			if len(v.secret) == 0 {
				return nil, errMsg(ErrBadAlgorithm, "HMAC token but no shared secret configured", nil)
			}
			return v.secret, nil
		case *jwt.SigningMethodRSA, *jwt.SigningMethodRSAPSS, *jwt.SigningMethodECDSA, *jwt.SigningMethodEd25519:
			if v.jwks == nil {
				return nil, errMsg(ErrBadAlgorithm, "asymmetric token but no JWKS configured", nil)
			}
			got, err := v.jwks.KeyfuncCtx(ctx)(t)
			if err != nil {
				return nil, wrapErr(ErrUnknownKey, err)
			}
			if set, ok := got.(jwt.VerificationKeySet); ok { // token without kid
				var keep jwt.VerificationKeySet
				for _, k := range set.Keys {
					if keyFits(t.Method, k) {
						keep.Keys = append(keep.Keys, k)
					}
				}
				if len(keep.Keys) == 0 {
					return nil, errMsg(ErrUnknownKey, "no JWKS key fits the token algorithm", nil)
				}
				return keep, nil
			}
			if !keyFits(t.Method, got) {
				return nil, errMsg(ErrUnknownKey, "JWKS key type does not fit the token algorithm", nil)
			}
			return got, nil
		default:
			return nil, wrapErr(ErrBadAlgorithm, nil)
		}
	}
}

// keyFits reports whether key is a public key of the type m verifies with.
func keyFits(m jwt.SigningMethod, key any) bool {
	switch m := m.(type) {
	case *jwt.SigningMethodRSA, *jwt.SigningMethodRSAPSS:
		_, ok := key.(*rsa.PublicKey)
		return ok
	case *jwt.SigningMethodECDSA:
		k, ok := key.(*ecdsa.PublicKey)
		return ok && k.Curve != nil && k.Curve.Params().BitSize == m.CurveBits
	case *jwt.SigningMethodEd25519:
		k, ok := key.(ed25519.PublicKey)
		return ok && len(k) == ed25519.PublicKeySize
	}
	return false
}

// mapError turns a golang-jwt error into one matching this package's
// sentinels. tok and tc are what ParseWithClaims returned alongside err.
func (v *Verifier) mapError(tok *jwt.Token, tc *tokenClaims, err error) error {
	if ke, ok := errors.AsType[*keyError](err); ok {
		return ke.err
	}
	if errors.Is(err, jwt.ErrTokenMalformed) {
		return wrapErr(ErrTokenMalformed, err)
	}
	if tok != nil {
		if alg, _ := tok.Header["alg"].(string); !slices.Contains(v.algs, alg) {
			return wrapErr(ErrBadAlgorithm, nil)
		}
	}
	switch {
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return wrapErr(ErrBadSignature, err)
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return wrapErr(ErrUnknownKey, err)
	case !errors.Is(err, jwt.ErrTokenInvalidClaims):
		return wrapErr(ErrTokenMalformed, err)
	case tc.ExpiresAt == nil:
		return wrapErr(ErrMissingExp, nil)
	case errors.Is(err, jwt.ErrTokenExpired):
		return wrapErr(ErrTokenExpired, nil)
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return wrapErr(ErrTokenNotYetValid, nil)
	case errors.Is(err, jwt.ErrTokenInvalidAudience), v.audience != "" && !slices.Contains(tc.Audience, v.audience):
		return wrapErr(ErrBadAudience, nil)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer), v.issuer != "" && tc.Issuer != v.issuer:
		return wrapErr(ErrBadIssuer, nil)
	}
	return wrapErr(ErrTokenMalformed, err)
}

// MintClaims describes a development token for MintHS256.
type MintClaims struct {
	// Subject is the sub claim (may be empty).
	Subject string
	// Scopes become the "scopes" claim (a JSON array).
	Scopes []string
	// Policy, when non-nil, becomes the "policy" claim and takes
	// precedence over Scopes at verification.
	Policy *acl.Policy
	// Audience, when set, becomes the aud claim.
	Audience string
	// Issuer, when set, becomes the iss claim.
	Issuer string
	// TTL is the lifetime: exp = now + TTL. It must be positive.
	TTL time.Duration
}

// Operator scopes, beside the topic scopes: "admin" grants every operator
// endpoint, "metrics" only the Prometheus scrape.
const (
	ScopeAdmin   = "admin"
	ScopeMetrics = "metrics"
)

// MintHS256 signs a development token with secret (at least
// MinSecretLength bytes) using HS256. It sets iat = now and exp = now + TTL
// (a zero now means time.Now()). Scopes (topic scopes, ScopeAdmin,
// ScopeMetrics) and Policy are validated first, so
// a minted token always verifies with a matching Verifier (same secret,
// audience and issuer). Errors wrap ErrBadConfig (secret, TTL),
// acl.ErrBadScope or acl.ErrBadPolicy. The result is a bearer credential: do not
// log it.
func MintHS256(secret []byte, c MintClaims, now time.Time) (string, error) {
	if len(secret) < MinSecretLength {
		return "", fmt.Errorf("%w: secret is %d bytes, need at least %d", ErrBadConfig, len(secret), MinSecretLength)
	}
	if c.TTL <= 0 {
		return "", fmt.Errorf("%w: TTL must be positive", ErrBadConfig)
	}
	// Topic scopes must compile; operator scopes pass as they are.
	topicScopes := slices.DeleteFunc(slices.Clone(c.Scopes), func(s string) bool { return s == ScopeAdmin || s == ScopeMetrics })
	if _, err := acl.ScopesToPolicy(topicScopes); err != nil {
		return "", err
	}
	var rawPolicy json.RawMessage
	if c.Policy != nil {
		if _, err := acl.CompilePolicy(*c.Policy); err != nil {
			return "", err
		}
		b, err := json.Marshal(c.Policy)
		if err != nil {
			return "", fmt.Errorf("%w: %w", acl.ErrBadPolicy, err)
		}
		rawPolicy = b
	}
	if now.IsZero() {
		now = time.Now()
	}
	tc := tokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   c.Subject,
			Issuer:    c.Issuer,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(c.TTL)),
		},
		Scopes: slices.Clone(c.Scopes),
		Policy: rawPolicy,
	}
	if c.Audience != "" {
		tc.Audience = jwt.ClaimStrings{c.Audience}
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, tc).SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("acl: sign token: %w", err)
	}
	return s, nil
}

// claimsKey is an unexported context key; only this package can set or
// read the value it indexes.
type claimsKey struct{}

// WithClaims returns a copy of ctx carrying the verified claims c (for
// logging the subject, or reading expiry). The claims must not be modified
// afterwards.
func WithClaims(ctx context.Context, c *Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, c)
}

// ClaimsFrom returns the claims stored by WithClaims; ok is false if there
// are none.
func ClaimsFrom(ctx context.Context) (c *Claims, ok bool) {
	c, ok = ctx.Value(claimsKey{}).(*Claims)
	return c, ok && c != nil
}
