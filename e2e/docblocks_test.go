package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/e2e/docblocks"
	"github.com/floodgate/floodgate/internal/redistest"
)

// docFiles are the Markdown files whose shell blocks TestDocShellBlocks
// runs, relative to the repository's root: the README, docs/, every
// Markdown file under examples/, and deploy/README.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "deploy/README.md"}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		files = append(files, strings.TrimPrefix(d, "../"))
	}
	err = filepath.WalkDir("../examples", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, strings.TrimPrefix(path, "../"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files[2:])
	return files
}

// docServer is the server the blocks talk to, started as the Makefile's
// run target starts it (`make run`): its arguments are read from the
// Makefile, so the test and `make run` cannot drift apart.
func docServer(t *testing.T) []string {
	t.Helper()
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	rules := regexp.MustCompile(`(?m)^RULES \?= (\S+)$`).FindSubmatch(mk)
	recipe := regexp.MustCompile(`(?m)^run: .*\n\t@?\$\(BIN\) (serve .*)$`).FindSubmatch(mk)
	if rules == nil || recipe == nil {
		t.Fatal("Makefile: no `RULES ?= ...` or no `run:` recipe running $(BIN) serve ...")
	}
	args := strings.Fields(strings.ReplaceAll(strings.ReplaceAll(string(recipe[1]), "$(RULES)", "../"+string(rules[1])), "$(ARGS)", ""))
	if len(args) < 1 || args[0] != "serve" {
		t.Fatalf("Makefile's run recipe runs %q, not serve", args)
	}
	return args[1:]
}

// serveWrapper is `floodgate` on the blocks' PATH (and their bin/floodgate).
// Every command is the real binary, except that `floodgate serve` listens
// on free loopback ports whatever the block says (it may name ports that
// the blocks' server or another test holds) and runs until it logs that it
// serves; then one Check over its HTTP port must be allowed by the store
// (not answered by a failure mode: with --redis-url, Redis answered), and
// after SIGTERM it must exit 0. A block that runs serve thus shows that its
// command line starts a server that decides, and stops cleanly.
const serveWrapper = `#!/usr/bin/env bash
real=%q
[ "$1" = serve ] || exec "$real" "$@"
args=() tokens=
while [ $# -gt 0 ]; do
  case "$1" in
    --grpc-addr|--http-addr) args+=("$1" 127.0.0.1:0); shift; shift || true;;
    --grpc-addr=*|--http-addr=*) args+=("${1%%%%=*}=127.0.0.1:0"); shift;;
    --auth-token-file) tokens=$2; args+=("$1"); shift;;
    --auth-token-file=*) tokens=${1#*=}; args+=("$1"); shift;;
    *) args+=("$1"); shift;;
  esac
done
log=$(mktemp)
fail() { cat "$log" >&2; rm -f "$log"; echo "floodgate serve: $1" >&2; exit "${2:-1}"; }
env -u FLOODGATE_ADDR FLOODGATE_GRPC_ADDR=127.0.0.1:0 FLOODGATE_HTTP_ADDR=127.0.0.1:0 "$real" "${args[@]}" 2>"$log" &
pid=$!
for _ in $(seq 300); do
  if grep -qE '"msg":"serving"|msg=serving' "$log"; then
    http=$(grep -oE '"http":"[^"]*"|http=[^ ]+' "$log" | head -1 | sed -E 's/^"http":"//; s/^http=//; s/"$//')
    auth=()
    [ -z "$tokens" ] || auth=(-H "Authorization: Bearer $(grep -v '^[[:space:]]*#' "$tokens" | awk 'NF { print $1; exit }')")
    answer=$(curl -s "${auth[@]}" -H 'Content-Type: application/json' \
      -d '{"key":"doc-test","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":10,"period":"60s"}}' "http://$http/v1/check")
    case "$answer" in
      *'"allowed":true'*'"degraded":false'*) ;;
      *) kill -KILL "$pid"; fail "a Check on $http answered $answer; want it allowed by the store (degraded false)";;
    esac
    kill -TERM "$pid"; wait "$pid"; rc=$?
    [ "$rc" -eq 0 ] || fail "exited $rc after SIGTERM" "$rc"
    rm -f "$log"; exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"; rc=$?
    fail "exited $rc before serving" $(( rc == 0 ? 1 : rc ))
  fi
  sleep 0.1
done
kill -KILL "$pid"; fail "did not serve within 30s"
`

// docHarness is what the blocks of one file run in.
type docHarness struct {
	dir   string // the blocks' working directory: the repository's entries linked in, bin/floodgate
	env   []string
	subst *strings.Replacer // the documents' addresses -> the harness'
}

// newDocHarness prepares a working directory that looks like the
// repository's root to the blocks (every top-level entry linked, so that
// `--config examples/rules` or `deploy/envoy/ratelimit.yaml` resolve, while
// files the blocks write land in a temporary directory), the wrapper as
// `floodgate` and `bin/floodgate`, the pinned grpcurl, and a server started
// as `make run` starts it. Addresses of the documents are mapped to the
// harness': 127.0.0.1:8081 (gRPC) and 127.0.0.1:8080 (HTTP) to the server's
// ports, which are also what `floodgate check` reaches by default
// (FLOODGATE_ADDR); 127.0.0.1:6379 to a redis-server started for the file
// when one of its blocks names it.
func newDocHarness(t *testing.T, needRedis bool) *docHarness {
	t.Helper()
	gc, err := grpcurl()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" || e.Name() == "bin" {
			continue
		}
		abs, err := filepath.Abs(filepath.Join("..", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	binDir := filepath.Join(dir, "bin")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf(serveWrapper, binary)
	if err := os.WriteFile(filepath.Join(binDir, "floodgate"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(gc, filepath.Join(binDir, "grpcurl")); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, docServer(t)...)
	pairs := []string{
		"127.0.0.1:8081", p.GRPCAddr, "localhost:8081", p.GRPCAddr,
		"127.0.0.1:8080", p.HTTPAddr, "localhost:8080", p.HTTPAddr,
	}
	if needRedis {
		pairs = append(pairs, "127.0.0.1:6379", redistest.StartServer(t).Addr())
	}
	// The README's one instruction for PATH, applied in dir.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "\nexport PATH=\"$PWD/bin:$PATH\"\n") {
		t.Fatal(`README.md no longer says export PATH="$PWD/bin:$PATH", the way these blocks find floodgate`)
	}
	env := append(os.Environ(),
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FLOODGATE_ADDR="+p.GRPCAddr,
		"GORACE=halt_on_error=1 atexit_sleep_ms=0",
	)
	return &docHarness{dir: dir, env: env, subst: strings.NewReplacer(pairs...)}
}

// run runs script with bash (-e -o pipefail: every command must succeed)
// in the harness and returns its output.
func (h *docHarness) run(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", h.subst.Replace(script))
	cmd.Dir, cmd.Env = h.dir, h.env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (timed out after 90s)", err)
	}
	return string(out), err
}

// TestDocShellBlocks runs every shell block (sh, bash, shell, console) of
// the README, docs/, examples/ and deploy/README.md against the built
// binary and the shipped examples, in each file's order, so that none can
// go stale: a sh or bash block must exit 0 as a whole (bash -e -o
// pipefail); each "$ " command of a console block must exit 0 and print
// what the block shows (docblocks.Match). A block marked
// `<!-- doc-test: not run: REASON -->` is only checked with bash -n; a
// malformed mark, or a fence in a language of no known kind, fails the
// test.
func TestDocShellBlocks(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the documentation's commands: apt-get install curl")
	}
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := docblocks.Extract(file, string(text))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(file, func(t *testing.T) {
			runDocBlocks(t, blocks)
		})
	}
}

// runDocBlocks runs one file's blocks in order in one harness (started only
// if some block runs).
func runDocBlocks(t *testing.T, blocks []docblocks.Block) {
	var h *docHarness
	for _, b := range blocks {
		if err := syntaxCheck(b); err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		if b.NotRun != "" {
			t.Logf("%s: not run (%s); bash -n passes", b, b.NotRun)
			continue
		}
		if h == nil {
			h = newDocHarness(t, needsRedis(blocks))
		}
		if _, err := h.runBlock(b); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
}

// syntaxCheck runs bash -n over a block's commands.
func syntaxCheck(b docblocks.Block) error {
	script := b.Body
	if b.Console() {
		steps, err := docblocks.Steps(b.Body)
		if err != nil {
			return err
		}
		var cmds []string
		for _, s := range steps {
			cmds = append(cmds, s.Command)
		}
		script = strings.Join(cmds, "\n") + "\n"
	}
	if out, err := exec.Command("bash", "-n", "-c", script).CombinedOutput(); err != nil {
		return fmt.Errorf("bash -n: %w\n%s", err, out)
	}
	return nil
}

// runBlock runs a block as TestDocShellBlocks says and returns the output
// of each of its commands (a sh block is one).
func (h *docHarness) runBlock(b docblocks.Block) ([]string, error) {
	if !b.Console() {
		out, err := h.run(b.Body)
		if err != nil {
			return nil, fmt.Errorf("%w\n--- block:\n%s--- output:\n%s", err, b.Body, out)
		}
		return []string{out}, nil
	}
	steps, err := docblocks.Steps(b.Body)
	if err != nil {
		return nil, err
	}
	var outs []string
	for _, s := range steps {
		out, err := h.run(s.Command)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w\n$ %s\n%s", s.Line, err, s.Command, out)
		}
		if err := docblocks.Match(s.Want, out); err != nil {
			return nil, fmt.Errorf("line %d: the output is not the one shown: %w\n$ %s\n--- shown:\n%s--- printed:\n%s", s.Line, err, s.Command, s.Want, out)
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// needsRedis reports whether a block to be run names the harness' Redis.
func needsRedis(blocks []docblocks.Block) bool {
	for _, b := range blocks {
		if b.NotRun == "" && strings.Contains(b.Body, "127.0.0.1:6379") {
			return true
		}
	}
	return false
}

// TestDocHarnessRefuses: the harness fails what a wrong doc block does, and
// passes what a right one does: a serve that stops before serving, or
// serves without its store answering; a failing command in the middle of a
// block or of a pipe; a console command printing other than shown.
func TestDocHarnessRefuses(t *testing.T) {
	h := newDocHarness(t, false)
	held, err := net.Listen("tcp", "127.0.0.1:0") // a port a block names that is not free
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, tc := range []struct {
		name, lang, body string
		ok               bool
	}{
		{"serve with a bad flag", "sh", "floodgate serve --redis-uri redis://127.0.0.1:6379/0\n", false},
		{"serve with a missing config", "sh", "floodgate serve --config no-such-rules\n", false},
		{"serve whose Redis does not answer", "sh", "floodgate serve --redis-url 127.0.0.1:1 --redis-dial-timeout 100ms\n", false},
		{"a failing command mid-block", "sh", "false\ntrue\n", false},
		{"a failing command mid-pipe", "sh", "false | true\n", false},
		{"a console command failing", "console", "$ false\n", false},
		{"a console output not shown", "console", "$ echo allowed\ndenied\n", false},
		{"serve on ports the doc names", "sh", "floodgate serve --config examples/rules --grpc-addr " + held.Addr().String() + " --http-addr=" + held.Addr().String() + "\n", true},
		{"check on the default address", "sh", "floodgate check --key harness --limit 1/1m --algorithm token_bucket\n", true},
		{"a console output shown", "console", "$ echo allowed in 1.5s\nallowed in 1.5s\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.runBlock(docblocks.Block{File: "harness", Line: 1, Lang: tc.lang, Body: tc.body})
			if (err == nil) != tc.ok {
				t.Fatalf("runBlock(%q) = %v, want ok=%v", tc.body, err, tc.ok)
			}
		})
	}
}
