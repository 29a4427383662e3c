package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/configview"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/store/redisstore"
)

const explainSynopsis = `Says why a request is limited, offline: for each descriptor of a request to
DOMAIN, the rule it matches (its path, file:line:column, name, algorithm and
limit, warning threshold, failure and shadow mode) and the store key it
counts under, with the
Redis key under --redis-prefix; for a descriptor that matches nothing, the
nearest rules and why each did not match. --bucket does the same for an
RLQS bucket id against the domain's quota_buckets.

  floodgate config explain --config rules/ --domain shop --descriptor path=/login,user=bob
  floodgate config explain --config rules/ --domain shop --bucket name=free,api_key=k1 --json

A descriptor is KEY=VALUE pairs separated by commas, in the order Envoy
sends its entries (a value cannot hold a comma). Exit status: 0 with an
explanation (matched or not); 1 when the config does not load; 2 on bad
flags, a malformed descriptor or an unknown domain.`

// explainFlags are the settings of `floodgate config explain`.
type explainFlags struct {
	config      string
	domain      string
	descriptors []string
	buckets     []string
	json        bool
	redisPrefix string
	load        rules.Options
}

func (f *explainFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "config file or folder (required)")
	fs.StringVar(&f.domain, "domain", "", "the request's domain (required)")
	fs.StringArrayVar(&f.descriptors, "descriptor", nil, "a descriptor as KEY=VALUE[,KEY=VALUE...]; repeat for a request of several")
	fs.StringArrayVar(&f.buckets, "bucket", nil, "an RLQS bucket id as KEY=VALUE[,KEY=VALUE...], matched against quota_buckets; repeatable")
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of text")
	fs.StringVar(&f.redisPrefix, "redis-prefix", redisstore.DefaultPrefix, "the server's --redis-prefix, for the Redis key names")
	registerRuleFlags(fs, &f.load)
}

// runConfigExplain runs `floodgate config explain`.
func runConfigExplain(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var f explainFlags
	fs := newFlagSet("config explain [flags]", explainSynopsis, stdout)
	f.register(fs)
	usageErr := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "floodgate config explain: "+format+"\n", a...)
		return exitCode(2)
	}
	if err := parseCommand(fs, args, getenv, stderr); err != nil {
		return err
	}
	switch {
	case f.config == "":
		return usageErr("--config is required")
	case f.domain == "":
		return usageErr("--domain is required")
	case len(f.descriptors) == 0 && len(f.buckets) == 0:
		return usageErr("give at least one --descriptor (or --bucket)")
	}
	descs, err := parseDescriptors(f.descriptors)
	if err != nil {
		return usageErr("--descriptor %v", err)
	}
	var buckets []map[string]string
	for _, b := range f.buckets {
		entries, err := parsePairs(b)
		if err != nil {
			return usageErr("--bucket %q: %v", b, err)
		}
		id := map[string]string{}
		for _, e := range entries {
			if _, dup := id[e.Key]; dup {
				return usageErr("--bucket %q: key %q given twice", b, e.Key)
			}
			id[e.Key] = e.Value
		}
		buckets = append(buckets, id)
	}
	cfg, err := rules.Load(f.config, f.load)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitCode(1)
	}
	if !cfg.HasDomain(f.domain) {
		return usageErr("no domain %q in %s (its domains: %s)", f.domain, f.config, quoteList(cfg.Domains()))
	}
	report := newExplainReport(cfg, f, descs, buckets)
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	report.writeText(stdout)
	return nil
}

// parsePairs reads "k=v,k2=v2": at least one pair, each with a non-empty
// key; a value may be empty and may hold '=' (the first one splits).
func parsePairs(s string) ([]rules.Entry, error) {
	if s == "" {
		return nil, errors.New("empty: want KEY=VALUE[,KEY=VALUE...]")
	}
	var out []rules.Entry
	for i, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("entry %d (%q) has no '=': want KEY=VALUE", i+1, part)
		case k == "":
			return nil, fmt.Errorf("entry %d (%q) has an empty key", i+1, part)
		}
		out = append(out, rules.Entry{Key: k, Value: v})
	}
	return out, nil
}

// parseDescriptors reads one descriptor of each string (parsePairs); an
// error quotes the string.
func parseDescriptors(ss []string) ([][]rules.Entry, error) {
	var out [][]rules.Entry
	for _, s := range ss {
		entries, err := parsePairs(s)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", s, err)
		}
		out = append(out, entries)
	}
	return out, nil
}

func quoteList(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// explainReport is the output of `floodgate config explain`, as JSON and
// as text.
type explainReport struct {
	Config      string             `json:"config"`
	Domain      string             `json:"domain"`
	RedisPrefix string             `json:"redis_prefix"`
	Descriptors []descriptorReport `json:"descriptors"`
	Buckets     []bucketReport     `json:"buckets,omitempty"`
}

// descriptorReport is one descriptor's explanation.
type descriptorReport struct {
	Entries    []entryReport     `json:"entries"`
	Matched    bool              `json:"matched"`
	Rules      []matchReport     `json:"rules,omitempty"`
	Candidates []candidateReport `json:"candidates,omitempty"`
}

type entryReport struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// matchReport is a matched rule, how the Envoy API decides it, and its
// keys. StoreKey is Go-quoted (it may hold any bytes); RedisKey is the
// Redis store's name for it (printable).
type matchReport struct {
	configview.RuleView
	Decision   string `json:"decision"`
	StoreKey   string `json:"store_key,omitempty"`
	RedisKey   string `json:"redis_key,omitempty"`
	ReplacedBy string `json:"replaced_by,omitempty"`
}

type candidateReport struct {
	Path    string                `json:"path"`
	Source  configview.SourceView `json:"source"`
	Rules   []string              `json:"rules"`
	Reasons []string              `json:"reasons"`
}

// bucketReport is one RLQS bucket id's explanation.
type bucketReport struct {
	BucketID map[string]string           `json:"bucket_id"`
	Action   string                      `json:"action"`
	Bucket   *configview.QuotaBucketView `json:"bucket,omitempty"`
	Others   []bucketCandidateReport     `json:"others,omitempty"`
}

type bucketCandidateReport struct {
	configview.QuotaBucketView
	Matches bool     `json:"matches"`
	Reasons []string `json:"reasons"`
}

func newExplainReport(cfg *rules.Set, f explainFlags, descs [][]rules.Entry, buckets []map[string]string) explainReport {
	r := explainReport{Config: f.config, Domain: f.domain, RedisPrefix: f.redisPrefix, Descriptors: []descriptorReport{}}
	for _, d := range cfg.Explain(f.domain, descs) {
		r.Descriptors = append(r.Descriptors, newDescriptorReport(d, f.redisPrefix))
	}
	for _, id := range buckets {
		r.Buckets = append(r.Buckets, newBucketReport(cfg.ExplainQuota(f.domain, id)))
	}
	return r
}

func newDescriptorReport(d rules.DescriptorExplanation, prefix string) descriptorReport {
	dr := descriptorReport{Matched: len(d.Matches) > 0}
	for _, e := range d.Entries {
		dr.Entries = append(dr.Entries, entryReport{e.Key, e.Value})
	}
	for _, m := range d.Matches {
		mr := matchReport{RuleView: configview.NewRuleView(m.Limit), ReplacedBy: m.ReplacedBy, Decision: decisionOf(m)}
		if m.StoreKey != "" {
			mr.StoreKey = strconv.QuoteToASCII(m.StoreKey)
			mr.RedisKey = redisstore.KeyName(prefix, m.Limit.Rate.Algorithm, m.StoreKey)
		}
		dr.Rules = append(dr.Rules, mr)
	}
	for _, c := range d.Candidates {
		cr := candidateReport{Path: rules.FormatPath(c.Path), Source: c.Source, Reasons: c.Reasons}
		for _, l := range c.Limits {
			cr.Rules = append(cr.Rules, l.Name)
		}
		dr.Candidates = append(dr.Candidates, cr)
	}
	return dr
}

// decisionOf says how the Envoy API decides a matched limit.
func decisionOf(m rules.LimitMatch) string {
	l := m.Limit
	switch {
	case m.ReplacedBy != "":
		return "not applied: replaced by " + strconv.Quote(m.ReplacedBy) + " in this request"
	case l.Unlimited:
		return "unlimited: always OK, the store is not asked"
	case l.DenyAll:
		return "requests_per_unit 0: always over the limit, the store is not asked"
	case l.ShadowMode:
		return "shadow mode: counted, but always answered OK"
	case l.ChargeAfter:
		return "charge: after: hits_addend charged as debt under the parent descriptor's counter (usage known afterwards), always answered OK"
	}
	return "counted in the store; over the limit answers OVER_LIMIT"
}

func newBucketReport(ex rules.QuotaExplanation) bucketReport {
	br := bucketReport{BucketID: ex.BucketID, Action: ex.Action.String()}
	if ex.Bucket != nil {
		v := configview.NewQuotaBucketView(ex.Bucket)
		br.Bucket = &v
	}
	for _, o := range ex.Others {
		br.Others = append(br.Others, bucketCandidateReport{QuotaBucketView: configview.NewQuotaBucketView(o.Bucket), Matches: o.Matches, Reasons: o.Reasons})
	}
	return br
}

// writeText prints the report for a person.
func (r explainReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "domain %q in %s\n", r.Domain, r.Config)
	for i, d := range r.Descriptors {
		var parts []string
		for _, e := range d.Entries {
			parts = append(parts, e.Key+"="+strconv.Quote(e.Value))
		}
		fmt.Fprintf(w, "\ndescriptor %d: %s\n", i+1, strings.Join(parts, ", "))
		if !d.Matched {
			fmt.Fprintln(w, "  matches no rule: the Envoy API answers OK for it")
			if len(d.Candidates) == 0 {
				fmt.Fprintln(w, "  no rule of the domain starts with this key")
			}
			for _, c := range d.Candidates {
				fmt.Fprintf(w, "  nearest: %s (%s) at %s\n", c.Path, strings.Join(c.Rules, ", "), c.Source)
				for _, why := range c.Reasons {
					fmt.Fprintf(w, "    - %s\n", why)
				}
			}
			continue
		}
		for _, m := range d.Rules {
			fmt.Fprintf(w, "  matches %s at %s\n", m.Name, m.Source)
			fmt.Fprintf(w, "    path:         %s\n", m.Path)
			fmt.Fprintf(w, "    limit:        %s\n", limitText(m.RuleView))
			if m.WarnAt != "" {
				fmt.Fprintf(w, "    warning at:   %d used (warn_at: %s): an allowed answer from there carries RateLimit-Warning\n", m.WarnAtUnits, m.WarnAt)
			}
			if m.FailureMode == "default" {
				m.FailureMode = "default (the server's --failure-mode)"
			}
			fmt.Fprintf(w, "    failure mode: %s\n", m.FailureMode)
			fmt.Fprintf(w, "    shadow mode:  %v\n", m.ShadowMode)
			fmt.Fprintf(w, "    decision:     %s\n", m.Decision)
			if m.StoreKey != "" {
				fmt.Fprintf(w, "    store key:    %s\n", m.StoreKey)
				fmt.Fprintf(w, "    redis key:    %s\n", strconv.Quote(m.RedisKey))
			}
		}
	}
	for _, b := range r.Buckets {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(b.BucketID)) {
			parts = append(parts, k+"="+strconv.Quote(b.BucketID[k]))
		}
		fmt.Fprintf(w, "\nbucket %s\n", strings.Join(parts, ", "))
		if b.Bucket == nil {
			fmt.Fprintf(w, "  matches no quota_buckets entry: it gets quota_unmatched, %s\n", b.Action)
		} else {
			fmt.Fprintf(w, "  matches %s at %s: %s", b.Bucket.Name, b.Bucket.Source, b.Action)
			if b.Bucket.Rate != nil {
				fmt.Fprintf(w, ", %s", b.Bucket.Rate.Text())
			}
			fmt.Fprintln(w)
		}
		for _, o := range b.Others {
			fmt.Fprintf(w, "  other: %s at %s\n", o.Name, o.Source)
			for _, why := range o.Reasons {
				fmt.Fprintf(w, "    - %s\n", why)
			}
		}
	}
}

func limitText(v configview.RuleView) string {
	switch {
	case v.Unlimited:
		return "unlimited"
	case v.DenyAll:
		return fmt.Sprintf("0 per %s (deny all)", v.Period)
	}
	if a, err := algorithms.ParseAlgorithm(v.Algorithm); err == nil && a.Facts().Waits {
		// Envoy cannot hold a request: the no-wait mode (algorithms.NoWait).
		return v.RateView.Text() + " (through Envoy: admits only what may start now, no queue)"
	}
	return v.RateView.Text()
}
