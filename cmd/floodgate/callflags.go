package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/zones"
)

// callFlags are the flags check and settle share: the key and its limit,
// and the connection to floodgate.
type callFlags struct {
	addr      string
	key       string
	limit     string
	algorithm string
	burst     int64
	timeZone  string
	policy    string
	timeout   time.Duration
	token     string
	tls       bool
	tlsFiles  auth.ClientFiles
	tlsName   string
}

// registerTarget registers the flags that name a key and its limit,
// shared by check and settle (keyUsage and limitUsage say what for).
func (f *callFlags) registerTarget(fs *pflag.FlagSet, keyUsage, limitUsage string) {
	fs.StringVar(&f.key, "key", "", keyUsage)
	fs.StringVar(&f.limit, "limit", "", limitUsage)
	fs.StringVar(&f.timeZone, "time-zone", "", "IANA time zone of a calendar --limit, e.g. Asia/Jakarta (default UTC)")
	fs.StringVar(&f.algorithm, "algorithm", "", algorithms.Names(algorithms.All(), "or", algorithms.Algorithm.String)+" (default "+algorithms.Default.String()+" with --limit; a policy's own with --policy)")
	fs.Int64Var(&f.burst, "burst", 0, burstUsage())
	fs.StringVar(&f.policy, "policy", "", "a policy name from the server's config, instead of --limit")
}

// registerConn registers the flags of the connection to floodgate,
// shared by check and settle.
func (f *callFlags) registerConn(fs *pflag.FlagSet, timeoutUsage, tokenUsage string) {
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8081", "floodgate's gRPC address")
	fs.DurationVar(&f.timeout, "timeout", time.Second, timeoutUsage)
	fs.StringVar(&f.token, "token", "", tokenUsage)
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS, verifying the server against the system roots (or --tls-ca)")
	fs.StringVar(&f.tlsFiles.CA, "tls-ca", "", "PEM file of CA certificates to verify the server; implies --tls")
	fs.StringVar(&f.tlsName, "tls-server-name", "", "server name to verify instead of --addr's host; implies --tls")
	fs.StringVar(&f.tlsFiles.Cert, "tls-client-cert", "", "PEM client certificate for mTLS (with --tls-client-key); implies --tls")
	fs.StringVar(&f.tlsFiles.Key, "tls-client-key", "", "PEM client key for mTLS; implies --tls")
}

// resolve checks the flags and turns them into a limit and dial options;
// more, when not nil, checks the command's own flags, after --key.
func (f *callFlags) resolve(more func() error) (client.Limit, []client.DialOption, error) {
	var l client.Limit
	if f.key == "" {
		return l, nil, errors.New("--key is required")
	}
	if more != nil {
		if err := more(); err != nil {
			return l, nil, err
		}
	}
	switch {
	case (f.limit == "") == (f.policy == ""):
		return l, nil, errors.New("give exactly one of --limit and --policy")
	case f.policy != "" && f.burst != 0:
		return l, nil, errors.New("--burst applies to --limit, not --policy")
	case f.policy != "" && f.timeZone != "":
		return l, nil, errors.New("--time-zone applies to a calendar --limit, not --policy")
	}
	if f.algorithm != "" {
		alg, err := algorithms.ParseAlgorithm(f.algorithm)
		if err != nil {
			return l, nil, fmt.Errorf("--algorithm: %w", err)
		}
		l.Algorithm = alg
	}
	reqs, per, _ := strings.Cut(f.limit, "/")
	switch per = strings.TrimSpace(per); {
	case f.policy != "":
		l.Policy = f.policy
	case strings.HasPrefix(per, "calendar_"):
		if err := f.calendarLimit(&l, reqs, per); err != nil {
			return l, nil, err
		}
	default:
		requests, period, err := parseRate(f.limit)
		if err != nil {
			return l, nil, fmt.Errorf("--limit: %w", err)
		}
		if f.timeZone != "" {
			return l, nil, errors.New("--time-zone applies to a calendar --limit such as 10000/calendar_month")
		}
		l.Requests, l.Period, l.Burst = requests, period, f.burst
	}
	if l.Policy == "" && l.Algorithm == algorithms.Unspecified {
		l.Algorithm = algorithms.Default
	}

	opts := []client.DialOption{client.WithTimeout(f.timeout)}
	if f.token != "" {
		opts = append(opts, client.WithToken(f.token))
	}
	if f.tlsOn() {
		cfg, err := f.tlsConfig()
		if err != nil {
			return l, nil, err
		}
		opts = append(opts, client.WithTLS(cfg))
	}
	return l, opts, nil
}

// tlsOn reports whether the connection is TLS: --tls, or any TLS file or
// name given.
func (f *callFlags) tlsOn() bool {
	return f.tls || f.tlsName != "" || f.tlsFiles != auth.ClientFiles{}
}

func (f *callFlags) tlsConfig() (*tls.Config, error) {
	cfg, err := auth.ClientTLS(f.tlsFiles,
		auth.ClientFiles{CA: "--tls-ca", Cert: "--tls-client-cert", Key: "--tls-client-key"})
	if err != nil {
		return nil, err
	}
	cfg.ServerName = f.tlsName
	return cfg, nil
}

// calendarLimit fills l from a calendar --limit REQUESTS/calendar_PERIOD
// and --time-zone; the algorithm defaults to algorithms.Compatible.
func (f *callFlags) calendarLimit(l *client.Limit, reqs, per string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(reqs), 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("--limit: requests must be a positive integer, got %q", reqs)
	}
	cal, err := algorithms.ParseCalendar(strings.TrimPrefix(per, "calendar_"))
	if err != nil {
		return fmt.Errorf("--limit: unknown calendar period %q (want calendar_day, calendar_week, calendar_month or calendar_year)", per)
	}
	if f.burst != 0 {
		return errors.New("--burst does not apply to a calendar --limit")
	}
	if _, err := zones.Load(f.timeZone); err != nil {
		return fmt.Errorf("--time-zone: %w", err)
	}
	if l.Algorithm == algorithms.Unspecified {
		l.Algorithm = algorithms.Compatible
	}
	l.Requests, l.Calendar, l.TimeZone = n, cal, f.timeZone
	return nil
}

// burstUsage is the --burst flag's help, naming the algorithms that take
// one (algorithms.Facts.Burst).
func burstUsage() string {
	takers := algorithms.Which(func(f algorithms.Facts) bool { return f.Burst != "" })
	return "capacity of a " + algorithms.Names(takers, "or", algorithms.Algorithm.String) + " (the queue's size of one that waits); 0 means the limit's requests"
}
