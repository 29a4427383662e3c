package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/internal/limited"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/server"
)

// limitedFlags are the settings of the heavy-hitter tracker (GET
// /debug/limited, the admin page, `floodgate top`).
type limitedFlags struct {
	cfg         limited.Config // Keys 0 turns tracking off; Salt is read from saltFile
	saltFile    string
	metricsKeys int
}

func (f *limitedFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.cfg.Keys, "limited-keys", limited.DefaultKeys, fmt.Sprintf("heaviest denied keys: counters per rule, for /debug/limited, the admin page and `floodgate top` (0 turns tracking off; at most %d; memory: docs/operations.md)", limited.MaxKeys))
	fs.IntVar(&f.cfg.Rules, "limited-rules", limited.DefaultRules, "heaviest denied keys: rules (Envoy rules, policies, inline limit rates) tracked at once")
	fs.StringVar(&f.saltFile, "limited-hash-salt-file", "", "heaviest denied keys: a file whose bytes salt a keyed hash (HMAC-SHA256) that every view shows instead of the key; the key itself is not kept")
	fs.IntVar(&f.metricsKeys, "limited-metrics-keys", 0, fmt.Sprintf("heaviest denied keys: export this many per rule on /metrics as floodgate_limited_key_denied, the key cut at %d bytes or hashed (0: none; at most %d)", limited.MetricKeyBytes, limited.MaxMetricKeys))
}

// check rejects values out of range (--limited-rules: checkNumbers).
func (f *limitedFlags) check() error {
	switch {
	case f.cfg.Keys < 0 || f.cfg.Keys > limited.MaxKeys:
		return fmt.Errorf("--limited-keys must be 0 to %d, got %d", limited.MaxKeys, f.cfg.Keys)
	case f.metricsKeys < 0 || f.metricsKeys > limited.MaxMetricKeys:
		return fmt.Errorf("--limited-metrics-keys must be 0 to %d, got %d", limited.MaxMetricKeys, f.metricsKeys)
	case f.metricsKeys > 0 && f.cfg.Keys == 0:
		return fmt.Errorf("--limited-metrics-keys needs tracking on (--limited-keys > 0)")
	}
	return nil
}

// tracker is the tracker of f, checked (nil with --limited-keys 0), its
// keys exported on reg with --limited-metrics-keys.
func (f *limitedFlags) tracker(reg prometheus.Registerer) (*limited.Tracker, error) {
	if f.cfg.Keys == 0 {
		return nil, nil
	}
	cfg := f.cfg
	if f.saltFile != "" {
		salt, err := os.ReadFile(f.saltFile)
		if err != nil {
			return nil, fmt.Errorf("--limited-hash-salt-file: %w", err)
		}
		if salt = bytes.TrimRight(salt, "\r\n"); len(salt) < 16 {
			return nil, fmt.Errorf("--limited-hash-salt-file %s: %d bytes, want at least 16 (e.g. head -c 32 /dev/urandom | base64 > FILE)", f.saltFile, len(salt))
		}
		cfg.Salt = salt
	}
	t := limited.New(cfg)
	if f.metricsKeys > 0 {
		if err := reg.Register(limited.NewCollector(t, f.metricsKeys, time.Now)); err != nil {
			return nil, fmt.Errorf("--limited-metrics-keys: %w", err)
		}
	}
	return t, nil
}

// explainHandler serves GET /debug/explain?domain=D&descriptor=K=V[,K=V...]
// (descriptor repeatable): `floodgate config explain --json` against the
// live rules of src, Redis key names under prefix. A bad query answers
// 400, an unknown domain 404.
func explainHandler(src server.RuleSource, prefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		domain, descs := q.Get("domain"), q["descriptor"]
		if domain == "" || len(descs) == 0 {
			http.Error(w, "want ?domain=DOMAIN&descriptor=KEY=VALUE[,KEY=VALUE...]", http.StatusBadRequest)
			return
		}
		var cfg *rules.Set
		if src != nil {
			cfg = src.Current()
		}
		if cfg == nil || !cfg.HasDomain(domain) {
			http.Error(w, fmt.Sprintf("no domain %q in the live rules", domain), http.StatusNotFound)
			return
		}
		entries, err := parseDescriptors(descs)
		if err != nil {
			http.Error(w, "descriptor "+err.Error(), http.StatusBadRequest)
			return
		}
		report := newExplainReport(cfg, explainFlags{config: "live rules", domain: domain, redisPrefix: prefix}, entries, nil)
		server.WriteJSON(w, report)
	})
}
