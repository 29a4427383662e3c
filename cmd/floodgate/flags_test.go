package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestHelpOnStdout: every command's --help, -h and "floodgate help CMD"
// print the command's usage on stdout, nothing on stderr, and exit 0.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--help"}, {"serve", "-h"}, {"help", "serve"},
		{"check", "--help"}, {"settle", "--help"}, {"bench", "--help"},
		{"simulate", "--help"}, {"config", "validate", "--help"},
		{"config", "explain", "--help"}, {"config", "--help"}, {"config", "help"},
		{"help", "config", "explain"}, {"help"}, {"--help"},
		{"version", "--help"}, {"version", "-h"}, {"help", "version"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(args, nil)
			if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage") {
				t.Fatalf("exit %d, stderr %q, stdout starts %q; want exit 0, usage on stdout only", code, stderr, firstLine(stdout))
			}
		})
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// TestFlagErrors: a bad flag is one line on stderr, exit 2, naming the
// flag (or variable), the value and the form wanted, or the nearest flag.
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"typo", []string{"serve", "--grpc-adr", "x"}, nil, "floodgate serve: unknown flag --grpc-adr; did you mean --grpc-addr? (floodgate serve --help lists every flag)"},
		{"single dash typo", []string{"check", "-limt", "1/s"}, nil, "unknown flag --limt; did you mean --limit?"},
		{"nothing near", []string{"serve", "--zzzzzzzz"}, nil, "floodgate serve: unknown flag --zzzzzzzz (floodgate serve --help lists every flag)"},
		{"duration", []string{"serve", "--redis-timeout", "50"}, nil, `floodgate serve: --redis-timeout "50": want a duration: a number with a unit (ns, us, ms, s, m, h), such as 250ms`},
		{"duration env", nil, map[string]string{"FLOODGATE_REDIS_TIMEOUT": "abc"}, `floodgate serve: $FLOODGATE_REDIS_TIMEOUT="abc": want a duration`},
		{"int", []string{"serve", "--redis-pool-size", "ten"}, nil, `--redis-pool-size "ten": want an integer, such as 100`},
		{"int range", []string{"serve", "--redis-pool-size", "99999999999999999999"}, nil, `--redis-pool-size "99999999999999999999": out of range for an integer`},
		{"uint", []string{"serve", "--max-concurrent-streams", "-1"}, nil, `--max-concurrent-streams "-1": want a whole number (0 or more)`},
		{"uint range", []string{"serve", "--max-concurrent-streams", "99999999999999999999"}, nil, `--max-concurrent-streams "99999999999999999999": out of range for an integer`},
		{"bool", []string{"serve", "--pprof=maybe"}, nil, `--pprof "maybe": want true or false`},
		{"bool env", nil, map[string]string{"FLOODGATE_PPROF": "yes"}, `$FLOODGATE_PPROF="yes": want true or false`},
		{"missing value", []string{"serve", "--grpc-addr"}, nil, "floodgate serve: --grpc-addr needs a value (floodgate serve --help lists every flag)"},
		{"config explain", []string{"config", "explain", "--domian", "x"}, nil, "floodgate config explain: unknown flag --domian; did you mean --domain? (floodgate config explain --help"},
		{"config validate", []string{"config", "validate", "--x"}, nil, "floodgate config validate: unknown flag --x (floodgate config validate --help"},
		{"bad syntax", []string{"serve", "---grpc-addr"}, nil, "bad flag syntax: ---grpc-addr (floodgate serve --help"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args == nil {
				args = []string{"serve"}
			}
			code, stdout, stderr := runCLI(args, tc.env)
			if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

// TestFlagValuesKept: parsing keeps what each form says: a standalone
// boolean, an explicit false, one dash as two, a negative value after its
// flag, and the environment under a command-line flag.
func TestFlagValuesKept(t *testing.T) {
	fs := newFlagSet("t [flags]", "test", io.Discard)
	on := fs.Bool("on", false, "")
	off := fs.Bool("off", true, "")
	d := fs.Duration("d", time.Second, "")
	n := fs.Int("n", 1, "")
	m := fs.Int("m", 1, "")
	err := parseFlags(fs, []string{"--on", "-off=false", "-d", "2s", "--m", "-3", "--", "-x"}, func(k string) string {
		return map[string]string{"FLOODGATE_D": "9s", "FLOODGATE_N": "7"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if !*on || *off || *d != 2*time.Second || *n != 7 || *m != -3 || fs.Arg(0) != "-x" {
		t.Fatalf("on=%v off=%v d=%v n=%d m=%d args=%q; want true false 2s 7 -3 [-x]", *on, *off, *d, *n, *m, fs.Args())
	}
}

// TestHelpToStdout: -h, --help and -help write the usage, with the
// synopsis and the flags, to the writer given and return pflag.ErrHelp; a
// failed parse writes nothing there.
func TestHelpToStdout(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"--nope"}} {
		var help strings.Builder
		fs := newFlagSet("t [flags]", "the synopsis", &help)
		fs.String("x", "", "an x")
		err := parseFlags(fs, args, func(string) string { return "" })
		if args[0] == "--nope" {
			if err == nil || errors.Is(err, pflag.ErrHelp) || help.Len() > 0 {
				t.Fatalf("--nope: %v, wrote %q", err, help.String())
			}
			continue
		}
		if !errors.Is(err, pflag.ErrHelp) || !strings.Contains(help.String(), "the synopsis") || !strings.Contains(help.String(), "--x") {
			t.Fatalf("%s: %v, help %q", args[0], err, help.String())
		}
	}
}

// TestServeHelpGrouped: serve --help lists its flags under the groups, in
// order, each flag with its type and default.
func TestServeHelpGrouped(t *testing.T) {
	_, out, _ := runCLI([]string{"serve", "--help"}, nil)
	last := -1
	for _, h := range []string{"\nListen:\n", "\nAuth and TLS:\n", "\nStore:\n", "\nRules:\n", "\nLimits and answers:\n", "\nObservability:\n"} {
		i := strings.Index(out, h)
		if i < 0 || i < last {
			t.Fatalf("heading %q missing or out of order in:\n%s", h, out)
		}
		last = i
	}
	for _, line := range []string{
		"  --redis-timeout duration  [$FLOODGATE_REDIS_TIMEOUT]",
		"  --grpc-addr string  [$FLOODGATE_GRPC_ADDR]",
		"  --pprof  [$FLOODGATE_PPROF]",
		"(default 127.0.0.1:8081)",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("serve --help lacks %q", line)
		}
	}
	sections := map[string]string{"--redis-url": "Store:", "--tls-cert": "Auth and TLS:", "--config-xds-server": "Rules:", "--log-format": "Observability:", "--max-streams": "Listen:", "--quota-mode": "Limits and answers:"}
	for fl, want := range sections {
		i := strings.Index(out, "  "+fl+" ")
		head := out[:i]
		got := head[strings.LastIndex(strings.TrimRight(head, "\n"), "\n\n")+2:]
		if !strings.HasPrefix(got, want) {
			t.Errorf("%s is under %q, want %q", fl, firstLine(got), want)
		}
	}
}

func TestNearestFlag(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	for _, n := range []string{"grpc-addr", "http-addr", "redis-url", "limit", "log-level", "log-format"} {
		fs.String(n, "", "")
	}
	for _, tc := range []struct{ typed, want string }{
		{"grpc-adr", "grpc-addr"},
		{"http-adr", "http-addr"},
		{"redis", "redis-url"},
		{"redis-url-x", "redis-url"},
		{"limt", "limit"},
		{"lmt", "limit"},
		{"redis-url-for-cache", "redis-url"},
		{"log-levl", "log-level"},
		{"log-fromat", "log-format"},
		{"zzzzzzzz", ""},
		{"tls", ""},
	} {
		if got := nearestFlag(fs, tc.typed); got != tc.want {
			t.Errorf("nearestFlag(%q) = %q, want %q", tc.typed, got, tc.want)
		}
	}
}

// TestNearestFlagTie: of two flags as near, the first in name order.
func TestNearestFlagTie(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("ab-y", "", "")
	fs.String("ab-x", "", "")
	if got := nearestFlag(fs, "ab-z"); got != "ab-x" {
		t.Errorf("nearestFlag(ab-z) = %q, want ab-x", got)
	}
}

func TestCommandName(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"serve [flags]", "serve"}, {"config validate PATH", "config validate"}, {"config explain [flags]", "config explain"}, {"check", "check"},
	} {
		if got := commandName(pflag.NewFlagSet(tc.name, pflag.ContinueOnError)); got != tc.want {
			t.Errorf("commandName(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestLogFatal: once serve has a logger, its fatal error is a log record
// in that format, a bad setting exits 2 and a failure 1; JSON durations are
// strings.
func TestLogFatal(t *testing.T) {
	for _, tc := range []struct {
		name, format string
		err          error
		code         int
		want         string
	}{
		{"setting json", "json", errString("--failure-mode must be open, closed or local"), 2, `{"time":`},
		{"failure json", "json", errString("grpc listen: address in use"), 1, `"msg":"floodgate serve stopped","err":"grpc listen: address in use"}`},
		{"failure text", "text", errString("boom"), 1, `level=ERROR msg="floodgate serve stopped" err=boom`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			log, err := newLogger(&b, "info", tc.format)
			if err != nil {
				t.Fatal(err)
			}
			got := logFatal(log, tc.err)
			if got != exitCode(tc.code) || !strings.Contains(b.String(), tc.want) || strings.Count(b.String(), "\n") != 1 {
				t.Fatalf("logFatal = %v, logged %q; want exit %d and one record containing %q", got, b.String(), tc.code, tc.want)
			}
		})
	}
	var b strings.Builder
	log, _ := newLogger(&b, "info", "json")
	if logFatal(log, nil) != nil || logFatal(log, exitCode(3)) != exitCode(3) || b.Len() != 0 {
		t.Fatalf("nil and exitCode must pass through unlogged; logged %q", b.String())
	}
	log.Info("drain", "drain_timeout", 10*time.Second)
	if !strings.Contains(b.String(), `"drain_timeout":"10s"`) {
		t.Fatalf("JSON duration: %q, want \"drain_timeout\":\"10s\"", b.String())
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestNewLoggerRefuses(t *testing.T) {
	if _, err := newLogger(nil, "loud", "text"); err == nil || err.Error() != `--log-level "loud": want debug, info, warn or error` {
		t.Errorf("log level: %v", err)
	}
	if _, err := newLogger(nil, "info", "yaml"); err == nil || err.Error() != `--log-format "yaml": want text or json` {
		t.Errorf("log format: %v", err)
	}
}

// TestDescribeErrorHTTPPort: check pointed at an HTTP/1 port says so;
// other errors are only their code and message.
func TestDescribeErrorHTTPPort(t *testing.T) {
	http1 := status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: http2: frame too large"`)
	if got := describeError(http1); !strings.HasPrefix(got, "Unavailable: connection error") || !strings.Contains(got, "this looks like an HTTP/1 port") {
		t.Errorf("HTTP port: %q", got)
	}
	if got := describeError(errString("dial: server preface timeout")); !strings.Contains(got, "--addr takes the gRPC port") {
		t.Errorf("plain error: %q", got)
	}
	if got := describeError(status.Error(codes.InvalidArgument, "limit.requests must be positive")); got != "InvalidArgument: limit.requests must be positive" {
		t.Errorf("other error: %q", got)
	}
	if got := describeError(errString("boom")); got != "boom" {
		t.Errorf("plain: %q", got)
	}
}

// TestHelpForEveryCommand: every command the top-level usage lists answers
// --help on stdout with exit 0 and a usage that names it, so a command
// added to the list without its help fails here.
func TestHelpForEveryCommand(t *testing.T) {
	var cmds []string
	for _, l := range strings.Split(usage, "\n") {
		synopsis, _, _ := strings.Cut(strings.TrimSpace(l), "  ") // the description follows two blanks
		f := strings.Fields(synopsis)
		if len(f) < 2 || f[0] != "floodgate" {
			continue
		}
		var cmd []string
		for _, w := range f[1:] {
			if strings.HasPrefix(w, "[") || w != strings.ToLower(w) { // [flags], PATH
				break
			}
			cmd = append(cmd, w)
		}
		cmds = append(cmds, strings.Join(cmd, " "))
	}
	if len(cmds) < 8 {
		t.Fatalf("found %d commands in the usage (%q), want every one", len(cmds), cmds)
	}
	for _, c := range cmds {
		t.Run(c, func(t *testing.T) {
			code, stdout, stderr := runCLI(append(strings.Fields(c), "--help"), nil)
			if code != 0 || stderr != "" || !strings.Contains(firstLines(stdout, 3), "floodgate "+c) || !strings.HasPrefix(stdout, "Usage:") {
				t.Fatalf("floodgate %s --help: exit %d, stderr %q, stdout %q; want exit 0 and a usage naming the command", c, code, stderr, firstLines(stdout, 3))
			}
		})
	}
}

func firstLines(s string, n int) string {
	l := strings.SplitN(s, "\n", n+1)
	return strings.Join(l[:min(n, len(l))], "\n")
}

// TestCLIEdges: a mistyped command gets the nearest one; a folder given
// to serve as an argument points at --config; serve --help names
// --reference-env; check --help files --addr apart from serve's listen
// addresses; bench --help shows --token as a string flag.
func TestCLIEdges(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serv"}, `floodgate: unknown command "serv"; did you mean "serve"? (floodgate help lists the commands)`},
		{[]string{"chek", "--key", "k"}, `did you mean "check"?`},
		{[]string{"serve", "../../examples/rules"}, `unexpected argument "../../examples/rules" (rules go after --config: floodgate serve --config ../../examples/rules)`},
	} {
		code, stdout, stderr := runCLI(tc.args, nil)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
	_, serveHelp, _ := runCLI([]string{"serve", "--help"}, nil)
	if !strings.Contains(serveHelp, "--reference-env") {
		t.Error("serve --help does not name --reference-env")
	}
	_, checkHelp, _ := runCLI([]string{"check", "--help"}, nil)
	if i := strings.Index(checkHelp, "  --addr "); i < 0 || strings.Contains(checkHelp[:i], "\nListen:\n") {
		t.Errorf("check --help files --addr under Listen:\n%s", checkHelp)
	}
	_, benchHelp, _ := runCLI([]string{"bench", "--help"}, nil)
	if !strings.Contains(benchHelp, "  --token string  [$FLOODGATE_TOKEN]\n") {
		t.Errorf("bench --help's --token line is not --token string:\n%s", benchHelp)
	}
}
