package main

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
)

// Secure metrics (--metrics-secure) are served as controller-runtime's
// metrics server serves them with filters.WithAuthenticationAndAuthorization
// (the convention since controller-runtime 0.16, replacing kube-rbac-proxy):
// over HTTPS, to a client whose bearer token the API server authenticates
// (a TokenReview) and whose user it allows to get the request's path (a
// SubjectAccessReview on the non-resource URL, /metrics). The
// authentication and the authorization are k8s.io/apiserver's delegating
// ones, which every Kubernetes component's own /metrics uses, with
// controller-runtime's settings: the answers are cached, a denial
// briefly.

// metricsAuthBackoff is how the TokenReviews and SubjectAccessReviews are
// retried when the API server fails them: apiserver's
// DefaultAuthWebhookRetryBackoff, as controller-runtime copies it (its
// package, k8s.io/apiserver/pkg/server/options, brings a whole API server).
var metricsAuthBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// withKubernetesAuth serves h only to requests whose bearer token the API
// server of kube authenticates and whose user it authorizes to get the
// path: 401 without a token it accepts (or when the TokenReview fails),
// 403 when its user may not, 500 when the SubjectAccessReview fails.
func withKubernetesAuth(kube kubernetes.Interface, h http.Handler, log *slog.Logger) (http.Handler, error) {
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:  kube.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &metricsAuthBackoff,
		CacheTTL:                 time.Minute,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("--metrics-secure: the TokenReview authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kube.AuthorizationV1(),
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       &metricsAuthBackoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("--metrics-secure: the SubjectAccessReview authorizer: %w", err)
	}
	return authorized(authn, authz, h, log), nil
}

// authorized serves h to the requests authn authenticates and authz
// authorizes to do their method (lower-case: get) on their path.
func authorized(authn authenticator.Request, authz authorizer.Authorizer, h http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok, err := authn.AuthenticateRequest(r)
		if !ok {
			// No token is no error; a token the TokenReview rejects, or a
			// TokenReview uc may not make (its ClusterRole lacks create on
			// tokenreviews), is: the log says which.
			if err != nil {
				log.Warn("metrics: not authenticated", "remote", r.RemoteAddr, "path", r.URL.Path, "err", err)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(r.Method), Path: r.URL.Path}
		decision, reason, err := authz.Authorize(r.Context(), attrs)
		if err != nil {
			log.Error("metrics: the SubjectAccessReview failed", "user", res.User.GetName(), "path", r.URL.Path, "err", err)
			http.Error(w, "Authorization failed", http.StatusInternalServerError)
			return
		}
		if decision != authorizer.DecisionAllow {
			log.Debug("metrics: forbidden", "user", res.User.GetName(), "path", r.URL.Path, "reason", reason)
			http.Error(w, fmt.Sprintf("Forbidden: user %s may not %s %s", res.User.GetName(), attrs.Verb, r.URL.Path), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// metricsTLS is the TLS configuration of secure metrics: the certificate
// and key of certDir (tls.crt and tls.key, read again when they change, as
// cert-manager renews them), or, when certDir is empty, a self-signed one
// made now, as controller-runtime makes one.
func metricsTLS(certDir string, log *slog.Logger) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if certDir == "" {
		host, _ := os.Hostname()
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(cmp.Or(host, "localhost"), nil, []string{"localhost"})
		if err != nil {
			return nil, fmt.Errorf("--metrics-secure: make a self-signed certificate: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("--metrics-secure: the self-signed certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
		log.Info("metrics: serving a self-signed certificate (no --metrics-cert-dir)")
		return cfg, nil
	}
	files := &certFiles{crt: filepath.Join(certDir, "tls.crt"), key: filepath.Join(certDir, "tls.key"), log: log}
	if _, err := files.get(nil); err != nil {
		return nil, fmt.Errorf("--metrics-cert-dir: %w", err)
	}
	cfg.GetCertificate = files.get
	log.Info("metrics: serving the certificate of --metrics-cert-dir", "cert", files.crt, "key", files.key)
	return cfg, nil
}

// certFiles is a certificate and its key in files, loaded again when either
// changes. A change that does not load (a half-written pair) keeps the
// certificate loaded last.
type certFiles struct {
	crt, key string
	log      *slog.Logger

	mu       sync.Mutex
	cert     *tls.Certificate
	modified [2]time.Time // of crt and key, when cert was loaded
}

func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var modified [2]time.Time
	for i, path := range []string{c.crt, c.key} {
		fi, err := os.Stat(path)
		if err != nil {
			return c.keep(fmt.Errorf("the metrics certificate: %w", err))
		}
		modified[i] = fi.ModTime()
	}
	if c.cert != nil && modified == c.modified {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(c.crt, c.key)
	if err != nil {
		return c.keep(fmt.Errorf("the metrics certificate %s and key %s: %w", c.crt, c.key, err))
	}
	if c.cert != nil {
		c.log.Info("metrics: certificate loaded again", "cert", c.crt)
	}
	c.cert, c.modified = &cert, modified
	return c.cert, nil
}

// keep is the certificate loaded last, err logged, or err when there is none.
func (c *certFiles) keep(err error) (*tls.Certificate, error) {
	if c.cert == nil {
		return nil, err
	}
	c.log.Warn("metrics: serving the certificate loaded last", "err", err)
	return c.cert, nil
}
