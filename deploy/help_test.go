package deploy_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// help is what `floodgate serve --help` lists: each flag with its
// environment variable and default.
type help struct {
	flags map[string]string // flag name -> default ("" if none shown)
	envs  map[string]string // FLOODGATE_X -> flag name
}

func (h help) hasEnv(name string) bool { _, ok := h.envs[name]; return ok }

var helpLine = regexp.MustCompile(`^  --([a-z0-9-]+)(?: [a-z0-9]+)?  \[\$([A-Z0-9_]+)\]$`)
var helpDefault = regexp.MustCompile(`\(default (.+)\)$`)

// serveHelp runs the built binary's serve --help and parses it.
func serveHelp(t *testing.T) help {
	t.Helper()
	out, err := exec.Command(floodgateBinary(t), "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("floodgate serve --help: %v\n%s", err, out)
	}
	h := help{flags: map[string]string{}, envs: map[string]string{}}
	lines := strings.Split(string(out), "\n")
	for i, l := range lines {
		m := helpLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		def := ""
		if i+1 < len(lines) {
			if d := helpDefault.FindStringSubmatch(lines[i+1]); d != nil {
				def = d[1]
			}
		}
		h.flags[m[1]] = def
		h.envs[m[2]] = m[1]
	}
	if len(h.flags) < 10 || !h.hasEnv("FLOODGATE_GRPC_ADDR") {
		t.Fatalf("floodgate serve --help lists %d flags; is its format still \"  --name [TYPE]  [$FLOODGATE_NAME]\"?\n%s", len(h.flags), out)
	}
	return h
}

// settings is how one container runs floodgate serve: its arguments and
// environment, resolved as floodgate resolves them (a flag on the command
// line wins over its variable, which wins over the default).
type settings struct {
	args []string          // after "serve"
	env  map[string]string // literal values
}

// check fails t for any flag or FLOODGATE_* variable serve does not have,
// and for flags not in the --name=value form (the only one the test reads
// unambiguously).
func (s settings) check(t *testing.T, where string, h help) {
	t.Helper()
	for _, a := range s.args {
		if !strings.HasPrefix(a, "-") {
			t.Errorf("%s: argument %q after serve (serve takes flags only)", where, a)
			continue
		}
		name, _, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		def, ok := h.flags[name]
		if !ok {
			t.Errorf("%s: flag %s is not in floodgate serve --help", where, a)
			continue
		}
		if !hasVal && def != "" && def != "true" {
			t.Errorf("%s: write %s as --%s=VALUE", where, a, name)
		}
	}
	for name := range s.env {
		if strings.HasPrefix(name, "FLOODGATE_") && !h.hasEnv(name) {
			t.Errorf("%s: $%s is not in floodgate serve --help", where, name)
		}
	}
}

// value is the flag's effective value.
func (s settings) value(h help, flag string) string {
	for _, a := range slices.Backward(s.args) {
		name, v, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == flag {
			if !hasVal {
				return "true"
			}
			return v
		}
	}
	for env, f := range h.envs {
		if f == flag {
			if v, ok := s.env[env]; ok {
				return v
			}
		}
	}
	return h.flags[flag]
}

// port is the port of the listen address flag.
func (s settings) port(t *testing.T, h help, flag string) int {
	t.Helper()
	addr := s.value(h, flag)
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("--%s=%q: %v", flag, addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		t.Errorf("--%s=%s listens on loopback: unreachable from outside the container", flag, addr)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("--%s=%q: %v", flag, addr, err)
	}
	return n
}

// TestFloodgateVariablesExist: every FLOODGATE_* name anywhere in the
// deployment files, comments included, is a variable of floodgate serve,
// so no example sends a reader after a variable that does not exist.
func TestFloodgateVariablesExist(t *testing.T) {
	h := serveHelp(t)
	files := []string{filepath.Join(repoRoot, "Dockerfile"), "README.md"}
	for _, dir := range []string{"kubernetes", "compose"} {
		files = append(files, yamlFiles(t, dir)...)
	}
	re := regexp.MustCompile(`\bFLOODGATE_[A-Z0-9_]*[A-Z0-9]\b`)
	seen := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range re.FindAllString(string(data), -1) {
			seen++
			if !h.hasEnv(name) {
				t.Errorf("%s: %s is not a variable of floodgate serve", f, name)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no FLOODGATE_* names found: the files moved?")
	}
}
