// Package deploy_test checks the deployment files statically, since no
// container engine runs where these tests do: the Dockerfile (its stages,
// its user, and its go build line, which the test runs on a copy of the
// build context .dockerignore leaves), the Kubernetes manifests in
// kubernetes/ and the compose file in compose/. Every FLOODGATE_* variable
// and --flag they use must be one `floodgate serve --help` lists, every
// rules file they mount must load, and the built binary is started with the
// Deployment's and the compose service's settings to show that their
// probes answer.
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/floodgate/floodgate/internal/rules"
)

// repoRoot is the repository root (the Docker build context), relative to
// this package's folder.
const repoRoot = ".."

// testVersion is the VERSION build argument the tests pass.
const testVersion = "deploytest-1.2.3"

// binDir holds the floodgate binary the tests share; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "floodgate-deploy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// ---------------------------------------------------------------------
// Dockerfile

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
	line int
}

// stage is one FROM and the instructions after it.
type stage struct {
	image, name string
	instrs      []instruction
}

// parseDockerfile splits a Dockerfile into stages. Comment lines (parser
// directives included) are dropped, also inside continuations, as Docker
// does.
func parseDockerfile(data string) ([]stage, error) {
	var stages []stage
	var cur strings.Builder
	start := 0
	flush := func() error {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return nil
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if in.cmd == "FROM" {
			var s stage
			fields := strings.Fields(in.args)
			for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
				fields = fields[1:]
			}
			switch {
			case len(fields) == 1:
			case len(fields) == 3 && strings.EqualFold(fields[1], "AS"):
				s.name = fields[2]
			default:
				return fmt.Errorf("Dockerfile:%d: FROM %s: want IMAGE [AS NAME]", in.line, in.args)
			}
			s.image = fields[0]
			stages = append(stages, s)
			return nil
		}
		if len(stages) == 0 {
			return fmt.Errorf("Dockerfile:%d: %s before the first FROM", in.line, in.cmd)
		}
		last := &stages[len(stages)-1]
		last.instrs = append(last.instrs, in)
		return nil
	}
	continued := false
	for i, raw := range strings.Split(data, "\n") {
		line := strings.TrimRight(raw, " \t\r")
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && !continued) {
			continue
		}
		if !continued {
			start = i + 1
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`))
			cur.WriteByte(' ')
			continued = true
			continue
		}
		cur.WriteString(line)
		continued = false
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if continued {
		return nil, errors.New("Dockerfile ends inside a continuation line")
	}
	return stages, nil
}

// find returns the stage's instructions of one kind.
func (s stage) find(cmd string) []instruction {
	var out []instruction
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// shellWords splits a shell command line into words as sh would for a
// simple command: quotes, backslashes and $NAME / ${NAME} expansion
// (expand is called for each name; an error stops). Anything more than one
// simple command (; && | ` $( ) is refused rather than misread.
func shellWords(s string, expand func(name string) (string, error)) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	readVar := func(i int) (string, int, error) {
		// s[i] == '$'
		if i+1 < len(s) && s[i+1] == '{' {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", 0, fmt.Errorf("unclosed ${ in %q", s)
			}
			name := s[i+2 : i+end]
			if !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(name) {
				return "", 0, fmt.Errorf("${%s}: only plain ${NAME} is understood", name)
			}
			v, err := expand(name)
			return v, i + end + 1, err
		}
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || j > i+1 && s[j] >= '0' && s[j] <= '9') {
			j++
		}
		if j == i+1 {
			return "", 0, fmt.Errorf("a $ not followed by a name in %q", s)
		}
		v, err := expand(s[i+1 : j])
		return v, j, err
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
			i++
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unclosed ' in %q", s)
			}
			w.WriteString(s[i+1 : i+1+end])
			inWord = true
			i += end + 2
		case c == '"':
			inWord = true
			i++
			for {
				if i >= len(s) {
					return nil, fmt.Errorf("unclosed \" in %q", s)
				}
				if s[i] == '"' {
					i++
					break
				}
				switch s[i] {
				case '$':
					v, next, err := readVar(i)
					if err != nil {
						return nil, err
					}
					w.WriteString(v)
					i = next
				case '`':
					return nil, fmt.Errorf("command substitution in %q", s)
				case '\\':
					if i+1 < len(s) && strings.IndexByte("$`\"\\", s[i+1]) >= 0 {
						i++
					}
					w.WriteByte(s[i])
					i++
				default:
					w.WriteByte(s[i])
					i++
				}
			}
		case c == '$':
			v, next, err := readVar(i)
			if err != nil {
				return nil, err
			}
			w.WriteString(v)
			inWord = true
			i = next
		case c == '\\' && i+1 < len(s):
			w.WriteByte(s[i+1])
			inWord = true
			i += 2
		case strings.IndexByte(";&|`()<>", c) >= 0:
			return nil, fmt.Errorf("%q is more than one simple command (found %q)", s, c)
		default:
			w.WriteByte(c)
			inWord = true
			i++
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// goBuild is the go build command of the Dockerfile's builder stage.
type goBuild struct {
	stage   stage
	env     []string // leading NAME=value words
	args    []string // after "go": build, flags, packages
	out     string   // the -o path
	pkgs    []string
	flags   map[string]string // -name or -name=value, without the dash
	workdir string
}

var envAssign = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// dockerBuild finds the single RUN of the Dockerfile that runs go build,
// expanding its build arguments from vars; every variable it uses must be
// declared by an ARG of its stage before it, or Docker would expand it to
// nothing.
func dockerBuild(stages []stage, vars map[string]string) (*goBuild, error) {
	var found *goBuild
	for _, s := range stages {
		declared := map[string]bool{}
		workdir := "/"
		for _, in := range s.instrs {
			switch in.cmd {
			case "ARG":
				name, _, _ := strings.Cut(in.args, "=")
				declared[strings.TrimSpace(name)] = true
			case "WORKDIR":
				workdir = path(workdir, in.args)
			case "RUN":
				if !strings.Contains(in.args, "go build") {
					continue
				}
				if found != nil {
					return nil, fmt.Errorf("Dockerfile:%d: a second RUN with go build", in.line)
				}
				words, err := shellWords(in.args, func(name string) (string, error) {
					if !declared[name] {
						return "", fmt.Errorf("Dockerfile:%d: $%s is not declared by an ARG before it in this stage", in.line, name)
					}
					v, ok := vars[name]
					if !ok {
						return "", fmt.Errorf("Dockerfile:%d: the test has no value for $%s", in.line, name)
					}
					return v, nil
				})
				if err != nil {
					return nil, err
				}
				for len(words) > 0 && strings.HasPrefix(words[0], "--") { // RUN --mount=...
					words = words[1:]
				}
				b := &goBuild{stage: s, flags: map[string]string{}, workdir: workdir}
				for len(words) > 0 && envAssign.MatchString(words[0]) {
					b.env = append(b.env, words[0])
					words = words[1:]
				}
				if len(words) < 2 || words[0] != "go" || words[1] != "build" {
					return nil, fmt.Errorf("Dockerfile:%d: want [NAME=value ...] go build ..., got %q", in.line, words)
				}
				b.args = words[1:]
				rest := words[2:]
				for i := 0; i < len(rest); i++ {
					a := rest[i]
					if !strings.HasPrefix(a, "-") {
						b.pkgs = append(b.pkgs, a)
						continue
					}
					name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
					if !hasVal && slices.Contains([]string{"o", "ldflags", "gcflags", "asmflags", "tags", "mod", "p", "C", "pgo"}, name) {
						if i+1 >= len(rest) {
							return nil, fmt.Errorf("Dockerfile:%d: %s without a value", in.line, a)
						}
						i++
						val = rest[i]
					}
					b.flags[name] = val
				}
				b.out = b.flags["o"]
				found = b
			}
		}
	}
	if found == nil {
		return nil, errors.New("the Dockerfile has no RUN with go build")
	}
	return found, nil
}

// path resolves p against the directory dir, as WORKDIR and COPY do.
func path(dir, p string) string {
	if strings.HasPrefix(p, "/") {
		return filepath.Clean(p)
	}
	return filepath.Clean(dir + "/" + p)
}

// buildVars are the build arguments the test builds with: the host's
// platform for Docker's automatic TARGETOS/TARGETARCH.
func buildVars() map[string]string {
	return map[string]string{"VERSION": testVersion, "TARGETOS": runtime.GOOS, "TARGETARCH": runtime.GOARCH, "BUILDPLATFORM": runtime.GOOS + "/" + runtime.GOARCH}
}

// readDockerfile parses the repository's Dockerfile.
func readDockerfile(t *testing.T) []stage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages, err := parseDockerfile(string(data))
	if err != nil {
		t.Fatal(err)
	}
	return stages
}

// runBuildLine runs the Dockerfile's go build command, as written, in the
// directory ctxDir (the build context), writing the binary to out.
func runBuildLine(b *goBuild, ctxDir, out string) ([]byte, error) {
	args := slices.Clone(b.args)
	for i, a := range args {
		switch {
		case a == "-o" || a == "--o":
			args[i+1] = out
		case strings.HasPrefix(a, "-o=") || strings.HasPrefix(a, "--o="):
			args[i] = "-o=" + out
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = ctxDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	cmd.Env = append(cmd.Env, b.env...)
	return cmd.CombinedOutput()
}

var shared struct {
	once sync.Once
	path string
	err  error
}

// floodgateBinary builds floodgate once per test run with the Dockerfile's
// build line and returns its path.
func floodgateBinary(t *testing.T) string {
	t.Helper()
	shared.once.Do(func() {
		data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
		if err != nil {
			shared.err = err
			return
		}
		stages, err := parseDockerfile(string(data))
		if err != nil {
			shared.err = err
			return
		}
		b, err := dockerBuild(stages, buildVars())
		if err != nil {
			shared.err = err
			return
		}
		abs, err := filepath.Abs(repoRoot)
		if err != nil {
			shared.err = err
			return
		}
		shared.path = filepath.Join(binDir, "floodgate")
		if out, err := runBuildLine(b, abs, shared.path); err != nil {
			shared.err = fmt.Errorf("building floodgate: %w\n%s", err, out)
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.path
}

// dockerignore is a .dockerignore file: Docker excludes a path when a
// pattern matches it or one of its parent folders.
type dockerignore []string

func readDockerignore(t *testing.T) dockerignore {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var pats dockerignore
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		// This matcher knows plain filepath.Match patterns only; a
		// pattern beyond them must be taught to it, not misread.
		if strings.HasPrefix(l, "!") || strings.Contains(l, "**") {
			t.Fatalf(".dockerignore: %q: exceptions and ** are not understood by this test's matcher", l)
		}
		p := filepath.Clean(strings.TrimPrefix(l, "/"))
		if _, err := filepath.Match(p, ""); err != nil {
			t.Fatalf(".dockerignore: %q: %v", l, err)
		}
		pats = append(pats, p)
	}
	return pats
}

// excluded reports whether rel (slash-separated, relative to the context)
// is left out of the build context.
func (d dockerignore) excluded(rel string) bool {
	for p := rel; p != "." && p != "/" && p != ""; p = filepath.Dir(p) {
		for _, pat := range d {
			if ok, _ := filepath.Match(pat, p); ok {
				return true
			}
		}
	}
	return false
}

// copyContext copies the files of the build context that .dockerignore
// leaves into dst.
func copyContext(t *testing.T, ignore dockerignore, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		if ignore.excluded(filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// goList returns the import paths of the packages pattern names, from dir.
func goList(t *testing.T, dir string, patterns ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}}"}, patterns...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", patterns, err)
	}
	return strings.Fields(string(out))
}

// TestDockerfile: the Dockerfile builds a static, trimmed, versioned
// ./cmd/floodgate in a golang:1.26 stage and runs it as a non-root user on
// a minimal image, with the listen addresses open to the container's
// network and the ports exposed.
func TestDockerfile(t *testing.T) {
	stages := readDockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("%d stage(s); want a builder and a final stage", len(stages))
	}
	b, err := dockerBuild(stages, buildVars())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.stage.image, "golang:1.26") {
		t.Errorf("the builder is FROM %s; want golang:1.26 (go.mod's go line)", b.stage.image)
	}
	if !slices.Contains(b.env, "CGO_ENABLED=0") {
		t.Errorf("go build runs with %v; want CGO_ENABLED=0 (a static binary for a libc-less image)", b.env)
	}
	if _, ok := b.flags["trimpath"]; !ok {
		t.Error("go build without -trimpath")
	}
	if ld := b.flags["ldflags"]; !strings.Contains(ld, "-s -w") || !strings.Contains(ld, "-X main.version="+testVersion) {
		t.Errorf("-ldflags %q: want -s -w and -X main.version=$VERSION", ld)
	}
	if b.out == "" {
		t.Fatal("go build without -o")
	}
	// The package built is the one `go build ./cmd/floodgate` builds.
	if got, want := goList(t, repoRoot, b.pkgs...), goList(t, repoRoot, "./cmd/floodgate"); !slices.Equal(got, want) {
		t.Errorf("the Dockerfile builds %v (%v); want %v", b.pkgs, got, want)
	}
	// The build runs where the context was copied: COPY . DIR, with DIR
	// the RUN's working directory.
	copied := false
	workdir := "/"
	for _, in := range b.stage.instrs {
		switch in.cmd {
		case "WORKDIR":
			workdir = path(workdir, in.args)
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) == 2 && f[0] == "." {
				copied = path(workdir, f[1]) == b.workdir
			}
		}
	}
	if !copied {
		t.Errorf("the builder stage has no COPY . %s (the context into go build's working directory)", b.workdir)
	}

	final := stages[len(stages)-1]
	if !strings.HasPrefix(final.image, "gcr.io/distroless/static") && final.image != "scratch" {
		t.Errorf("the final stage is FROM %s; want gcr.io/distroless/static-debian12:nonroot or scratch", final.image)
	}
	if final.image == "scratch" {
		if !slices.ContainsFunc(final.find("COPY"), func(in instruction) bool { return strings.Contains(in.args, "ca-certificates") }) {
			t.Error("a scratch image needs CA certificates for rediss:// and TLS")
		}
	}
	if uid := dockerUID(t, final); uid == 0 {
		t.Error("the final stage runs as root")
	}
	copies := final.find("COPY")
	wantCopy := fmt.Sprintf("--from=%s %s /floodgate", b.stage.name, b.out)
	if b.stage.name == "" || !slices.ContainsFunc(copies, func(in instruction) bool { return in.args == wantCopy }) {
		t.Errorf("the final stage's COPYs %v; want COPY %s", copies, wantCopy)
	}
	if got := execForm(t, final, "ENTRYPOINT"); !slices.Equal(got, []string{"/floodgate"}) {
		t.Errorf("ENTRYPOINT %q; want [\"/floodgate\"]", got)
	}
	if got := execForm(t, final, "CMD"); !slices.Equal(got, []string{"serve"}) {
		t.Errorf("CMD %q; want [\"serve\"]", got)
	}
	env := dockerEnv(t, final)
	var exposed []string
	for _, in := range final.find("EXPOSE") {
		exposed = append(exposed, strings.Fields(in.args)...)
	}
	for _, name := range []string{"FLOODGATE_GRPC_ADDR", "FLOODGATE_HTTP_ADDR"} {
		host, port, err := net.SplitHostPort(env[name])
		if err != nil {
			t.Errorf("ENV %s=%q: %v", name, env[name], err)
			continue
		}
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			t.Errorf("ENV %s=%s listens on loopback: unreachable from outside the container", name, env[name])
		}
		if !slices.Contains(exposed, port) && !slices.Contains(exposed, port+"/tcp") {
			t.Errorf("ENV %s=%s: port %s is not in EXPOSE %v", name, env[name], port, exposed)
		}
	}
	help := serveHelp(t)
	for name := range env {
		if strings.HasPrefix(name, "FLOODGATE_") && !help.hasEnv(name) {
			t.Errorf("ENV %s is no variable of floodgate serve", name)
		}
	}
}

// dockerUID is the numeric user the final stage runs as: its USER, else
// the distroless :nonroot image's 65532. A user name would keep
// Kubernetes' runAsNonRoot from verifying it, so it fails the test.
func dockerUID(t *testing.T, s stage) int {
	t.Helper()
	users := s.find("USER")
	if len(users) == 0 {
		if strings.HasSuffix(s.image, ":nonroot") {
			return 65532
		}
		t.Fatalf("the final stage (FROM %s) sets no USER", s.image)
	}
	u, _, _ := strings.Cut(users[len(users)-1].args, ":")
	uid, err := strconv.Atoi(u)
	if err != nil {
		t.Fatalf("USER %s: want a numeric UID (runAsNonRoot cannot check a name)", users[len(users)-1].args)
	}
	return uid
}

// execForm is the JSON (exec) form of the stage's last cmd instruction.
func execForm(t *testing.T, s stage, cmd string) []string {
	t.Helper()
	ins := s.find(cmd)
	if len(ins) == 0 {
		return nil
	}
	var out []string
	if err := json.Unmarshal([]byte(ins[len(ins)-1].args), &out); err != nil {
		t.Errorf("%s %s: not the exec (JSON) form: %v", cmd, ins[len(ins)-1].args, err)
	}
	return out
}

// dockerEnv is the stage's ENV, in the NAME=value form.
func dockerEnv(t *testing.T, s stage) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, in := range s.find("ENV") {
		words, err := shellWords(in.args, func(name string) (string, error) { return "", fmt.Errorf("$%s in ENV", name) })
		if err != nil {
			t.Fatalf("ENV %s: %v", in.args, err)
		}
		for _, w := range words {
			k, v, ok := strings.Cut(w, "=")
			if !ok {
				t.Fatalf("ENV %s: write ENV NAME=value", in.args)
			}
			env[k] = v
		}
	}
	return env
}

// TestDockerfileBuildLine runs the Dockerfile's go build line, as written,
// on a copy of the build context .dockerignore leaves (so an exclusion the
// build needs fails here), and runs the binary it makes.
func TestDockerfileBuildLine(t *testing.T) {
	b, err := dockerBuild(readDockerfile(t), buildVars())
	if err != nil {
		t.Fatal(err)
	}
	ignore := readDockerignore(t)
	for _, must := range []string{".git", "floodgate", "server.test"} {
		if !ignore.excluded(must) {
			t.Errorf(".dockerignore keeps %s in the build context", must)
		}
	}
	for _, keep := range []string{"go.mod", "go.sum", "cmd/floodgate/main.go", "internal/rules/load.go"} {
		if ignore.excluded(keep) {
			t.Errorf(".dockerignore excludes %s, which the build needs", keep)
		}
	}
	ctxDir := filepath.Join(t.TempDir(), "context")
	copyContext(t, ignore, ctxDir)
	// Every file a COPY of the builder stage names is in the context.
	for _, in := range b.stage.find("COPY") {
		f := strings.Fields(in.args)
		if len(f) < 2 || strings.HasPrefix(f[0], "--from") {
			continue
		}
		for _, src := range f[:len(f)-1] {
			if _, err := os.Stat(filepath.Join(ctxDir, src)); err != nil {
				t.Errorf("Dockerfile:%d: COPY %s: not in the build context: %v", in.line, src, err)
			}
		}
	}
	bin := filepath.Join(t.TempDir(), "floodgate")
	if out, err := runBuildLine(b, ctxDir, bin); err != nil {
		t.Fatalf("the Dockerfile's go build line in the build context: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("floodgate version: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "floodgate "+testVersion; got != want {
		t.Errorf("floodgate version = %q; want %q (-X main.version=$VERSION)", got, want)
	}
}

// ---------------------------------------------------------------------
// floodgate serve --help

// help is what `floodgate serve --help` lists: each flag with its
// environment variable and default.
type help struct {
	flags map[string]string // flag name -> default ("" if none shown)
	envs  map[string]string // FLOODGATE_X -> flag name
}

func (h help) hasEnv(name string) bool { _, ok := h.envs[name]; return ok }

var helpLine = regexp.MustCompile(`^  --([a-z0-9-]+)  \[\$([A-Z0-9_]+)\]$`)
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
		t.Fatalf("floodgate serve --help lists %d flags; is its format still \"  --name  [$FLOODGATE_NAME]\"?\n%s", len(h.flags), out)
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

// ---------------------------------------------------------------------
// YAML

// yamlFiles lists the *.yaml and *.yml files under dir.
func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(p); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no YAML files under %s", dir)
	}
	return files
}

// decodeAll decodes every document of a YAML file into nodes.
func decodeAll(t *testing.T, file string) []*yaml.Node {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(n.Content) == 0 || n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null" {
			continue // an empty document (a trailing ---)
		}
		docs = append(docs, &n)
	}
	if len(docs) == 0 {
		t.Fatalf("%s: no YAML documents", file)
	}
	return docs
}

// manifest is one Kubernetes object.
type manifest struct {
	file string
	node *yaml.Node
	head struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
	}
}

func (m manifest) String() string {
	return fmt.Sprintf("%s (%s %s)", m.file, m.head.Kind, m.head.Metadata.Name)
}

// decode decodes the whole object into v.
func (m manifest) decode(t *testing.T, v any) {
	t.Helper()
	if err := m.node.Decode(v); err != nil {
		t.Fatalf("%s: %v", m, err)
	}
}

// kustomization is the part of kustomization.yaml the tests read.
type kustomization struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Resources  []string `yaml:"resources"`
	Images     []struct {
		Name    string `yaml:"name"`
		NewName string `yaml:"newName"`
		NewTag  string `yaml:"newTag"`
	} `yaml:"images"`
}

// k8sManifests parses every object under kubernetes/ (kustomization.yaml
// apart).
func k8sManifests(t *testing.T) ([]manifest, kustomization) {
	t.Helper()
	var out []manifest
	var k kustomization
	for _, f := range yamlFiles(t, "kubernetes") {
		docs := decodeAll(t, f)
		if filepath.Base(f) == "kustomization.yaml" {
			if len(docs) != 1 {
				t.Fatalf("%s: %d documents", f, len(docs))
			}
			if err := docs[0].Decode(&k); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			continue
		}
		for i, d := range docs {
			m := manifest{file: f, node: d}
			if err := d.Decode(&m.head); err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			if m.head.APIVersion == "" || m.head.Kind == "" || m.head.Metadata.Name == "" {
				t.Errorf("%s, document %d: apiVersion %q, kind %q, metadata.name %q: all three are required", f, i+1, m.head.APIVersion, m.head.Kind, m.head.Metadata.Name)
			}
			out = append(out, m)
		}
	}
	return out, k
}

// byKind returns the objects of one kind.
func byKind(ms []manifest, kind string) []manifest {
	var out []manifest
	for _, m := range ms {
		if m.head.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// the Kubernetes objects the tests read, as far as they read them.
type (
	selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	probe struct {
		HTTPGet *struct {
			Path string    `yaml:"path"`
			Port yaml.Node `yaml:"port"`
		} `yaml:"httpGet"`
		GRPC *struct {
			Port int `yaml:"port"`
		} `yaml:"grpc"`
	}
	envVar struct {
		Name      string  `yaml:"name"`
		Value     *string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
			ConfigMapKeyRef  *struct{} `yaml:"configMapKeyRef"`
			ResourceFieldRef *struct {
				Resource string `yaml:"resource"`
			} `yaml:"resourceFieldRef"`
		} `yaml:"valueFrom"`
	}
	container struct {
		Name    string   `yaml:"name"`
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Env     []envVar `yaml:"env"`
		Ports   []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		Lifecycle      *struct {
			PreStop *struct {
				Sleep *struct {
					Seconds int `yaml:"seconds"`
				} `yaml:"sleep"`
			} `yaml:"preStop"`
		} `yaml:"lifecycle"`
		Resources struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext *struct {
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
			RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			SubPath   string `yaml:"subPath"`
		} `yaml:"volumeMounts"`
	}
	deployment struct {
		Spec struct {
			Replicas int      `yaml:"replicas"`
			Selector selector `yaml:"selector"`
			Template struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec struct {
					TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
					SecurityContext               struct {
						RunAsNonRoot *bool `yaml:"runAsNonRoot"`
						RunAsUser    *int  `yaml:"runAsUser"`
					} `yaml:"securityContext"`
					Containers []container `yaml:"containers"`
					Volumes    []struct {
						Name      string `yaml:"name"`
						ConfigMap *struct {
							Name string `yaml:"name"`
						} `yaml:"configMap"`
						Secret *struct {
							SecretName string `yaml:"secretName"`
						} `yaml:"secret"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	service struct {
		Spec struct {
			ClusterIP string            `yaml:"clusterIP"`
			Selector  map[string]string `yaml:"selector"`
			Ports     []struct {
				Name        string    `yaml:"name"`
				Port        int       `yaml:"port"`
				TargetPort  yaml.Node `yaml:"targetPort"`
				AppProtocol string    `yaml:"appProtocol"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	configMap struct {
		Data map[string]string `yaml:"data"`
	}
	secret struct {
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`
	}
	pdb struct {
		Spec struct {
			Selector selector `yaml:"selector"`
		} `yaml:"spec"`
	}
	networkPolicy struct {
		Spec struct {
			PodSelector selector `yaml:"podSelector"`
			PolicyTypes []string `yaml:"policyTypes"`
			Ingress     []struct {
				From []struct {
					PodSelector       *selector `yaml:"podSelector"`
					NamespaceSelector *selector `yaml:"namespaceSelector"`
					IPBlock           *struct {
						CIDR string `yaml:"cidr"`
					} `yaml:"ipBlock"`
				} `yaml:"from"`
				Ports []struct {
					Port yaml.Node `yaml:"port"`
				} `yaml:"ports"`
			} `yaml:"ingress"`
		} `yaml:"spec"`
	}
)

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// imageName is an image reference without its tag or digest.
func imageName(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

// portOf resolves a probe's or Service's port (a number or a container
// port's name) to a number.
func portOf(t *testing.T, n yaml.Node, c container) int {
	t.Helper()
	if p, err := strconv.Atoi(n.Value); err == nil {
		return p
	}
	for _, p := range c.Ports {
		if p.Name == n.Value {
			return p.ContainerPort
		}
	}
	t.Errorf("port %q is neither a number nor a port of container %s", n.Value, c.Name)
	return -1
}

// TestKubernetes: the objects parse and refer to each other correctly
// (labels, ports, the ConfigMap, the Secret, the image), the floodgate
// container's flags, variables, probes, security and shutdown timing are
// right, and the rules in the ConfigMap load.
func TestKubernetes(t *testing.T) {
	h := serveHelp(t)
	ms, k := k8sManifests(t)

	// kustomization.yaml lists exactly the other files.
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml: apiVersion %q, kind %q", k.APIVersion, k.Kind)
	}
	var files []string
	for _, f := range yamlFiles(t, "kubernetes") {
		if filepath.Base(f) != "kustomization.yaml" {
			files = append(files, filepath.Base(f))
		}
	}
	if got, want := slices.Sorted(slices.Values(k.Resources)), slices.Sorted(slices.Values(files)); !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources %v; the folder holds %v", got, want)
	}

	deps := byKind(ms, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%d Deployments; want 1", len(deps))
	}
	var d deployment
	deps[0].decode(t, &d)
	pod := d.Spec.Template.Spec
	if d.Spec.Replicas < 2 {
		t.Errorf("replicas: %d; the example shows several replicas sharing Redis", d.Spec.Replicas)
	}
	podLabels := d.Spec.Template.Metadata.Labels
	if !subset(d.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("Deployment selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, podLabels)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers; want floodgate alone", len(pod.Containers))
	}
	c := pod.Containers[0]

	// The image is the one kustomization.yaml retags.
	if len(k.Images) != 1 || k.Images[0].Name != imageName(c.Image) {
		t.Errorf("kustomization.yaml images %+v do not name the container's image %s", k.Images, c.Image)
	}

	// Flags and variables, resolved as floodgate resolves them.
	if len(c.Command) > 0 && !slices.Equal(c.Command, []string{"/floodgate"}) {
		t.Errorf("command %q: the image's entrypoint is /floodgate", c.Command)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("args %q: want serve first", c.Args)
	}
	s := settings{args: c.Args[1:], env: map[string]string{}}
	var configMount, redisSecret string
	for _, e := range c.Env {
		switch {
		case e.Value != nil:
			s.env[e.Name] = *e.Value
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			if e.Name == "FLOODGATE_REDIS_URL" {
				redisSecret = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
			s.env[e.Name] = "(secret)"
		case e.ValueFrom != nil:
		default:
			t.Errorf("env %s has neither value nor valueFrom", e.Name)
		}
	}
	s.check(t, deps[0].String(), h)
	for _, want := range []string{"FLOODGATE_CONFIG", "FLOODGATE_LOG_FORMAT", "FLOODGATE_REDIS_URL"} {
		if _, ok := s.env[want]; !ok {
			t.Errorf("the container does not set %s", want)
		}
	}
	if f := s.value(h, "log-format"); f != "json" {
		t.Errorf("--log-format is %q; want json for log collectors", f)
	}

	// Ports and probes: the admin port serves /healthz and /readyz.
	grpcPort, httpPort := s.port(t, h, "grpc-addr"), s.port(t, h, "http-addr")
	ports := map[int]bool{}
	for _, p := range c.Ports {
		ports[p.ContainerPort] = true
	}
	if !ports[grpcPort] || !ports[httpPort] {
		t.Errorf("container ports %+v; floodgate listens on %d (gRPC) and %d (HTTP)", c.Ports, grpcPort, httpPort)
	}
	for _, p := range []struct {
		name, path string
		probe      *probe
	}{{"livenessProbe", "/healthz", c.LivenessProbe}, {"readinessProbe", "/readyz", c.ReadinessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe on %s", p.name, p.path)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s: path %q; want %s", p.name, p.probe.HTTPGet.Path, p.path)
		}
		if got := portOf(t, p.probe.HTTPGet.Port, c); got != httpPort {
			t.Errorf("%s: port %d; the admin server listens on %d", p.name, got, httpPort)
		}
	}

	// Security.
	psc := pod.SecurityContext
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("the pod does not set runAsNonRoot: true")
	}
	stages := readDockerfile(t)
	if uid := dockerUID(t, stages[len(stages)-1]); psc.RunAsUser != nil && *psc.RunAsUser != uid {
		t.Errorf("runAsUser %d; the image's user is %d", *psc.RunAsUser, uid)
	}
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("container securityContext %+v; want allowPrivilegeEscalation false, readOnlyRootFilesystem true, drop ALL", sc)
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
		t.Errorf("resources %+v; want cpu and memory requests and a memory limit", c.Resources)
	}

	// Shutdown: the grace period covers the preStop pause and the drain.
	drain, err := time.ParseDuration(s.value(h, "drain-timeout"))
	if err != nil {
		t.Fatalf("--drain-timeout: %v", err)
	}
	pause := 0
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		pause = c.Lifecycle.PreStop.Sleep.Seconds
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= drain+time.Duration(pause)*time.Second {
		t.Errorf("terminationGracePeriodSeconds %s is not above the preStop pause (%ds) plus --drain-timeout (%v): in-flight calls would be killed", intOrUnset(g), pause, drain)
	}

	// The Service(s) select the pods and reach their ports; one port is
	// the gRPC one, marked as gRPC.
	svcs := byKind(ms, "Service")
	if len(svcs) == 0 {
		t.Fatal("no Service")
	}
	for _, m := range svcs {
		var svc service
		m.decode(t, &svc)
		if !subset(svc.Spec.Selector, podLabels) {
			t.Errorf("%s: selector %v does not select the pods %v", m, svc.Spec.Selector, podLabels)
		}
		grpcSeen := false
		for _, p := range svc.Spec.Ports {
			target := p.TargetPort
			if target.Value == "" {
				target.Value = strconv.Itoa(p.Port)
			}
			tp := portOf(t, target, c)
			if !ports[tp] {
				t.Errorf("%s: port %s targets %d, which the container does not listen on", m, p.Name, tp)
			}
			if tp == grpcPort {
				grpcSeen = true
				if p.Name != "grpc" && p.AppProtocol != "grpc" {
					t.Errorf("%s: the gRPC port is named %q with appProtocol %q; name it grpc or set appProtocol: grpc", m, p.Name, p.AppProtocol)
				}
			}
		}
		if !grpcSeen {
			t.Errorf("%s exposes no gRPC port (%d)", m, grpcPort)
		}
	}
	for _, m := range byKind(ms, "PodDisruptionBudget") {
		var p pdb
		m.decode(t, &p)
		if !subset(p.Spec.Selector.MatchLabels, podLabels) {
			t.Errorf("%s: selector %v does not select the pods", m, p.Spec.Selector.MatchLabels)
		}
	}

	// The Redis URL comes from the example Secret.
	secrets := map[string]secret{}
	for _, m := range byKind(ms, "Secret") {
		var sec secret
		m.decode(t, &sec)
		secrets[m.head.Metadata.Name] = sec
		if !strings.Contains(m.file, "example") {
			t.Errorf("%s: a Secret in a file not named as an example", m)
		}
	}
	name, key, _ := strings.Cut(redisSecret, "/")
	if sec, ok := secrets[name]; !ok {
		t.Errorf("FLOODGATE_REDIS_URL comes from Secret %q, which no manifest defines", name)
	} else if u := sec.StringData[key]; u == "" {
		t.Errorf("Secret %s has no stringData key %q", name, key)
	} else if pu, err := url.Parse(u); err != nil || (pu.Scheme != "redis" && pu.Scheme != "rediss") {
		t.Errorf("Secret %s: %s = %q is not a redis:// or rediss:// URL", name, key, u)
	}

	// FLOODGATE_CONFIG is the mount of the ConfigMap, whose rules load.
	cfgPath := s.value(h, "config")
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != cfgPath {
			continue
		}
		if vm.SubPath != "" {
			t.Errorf("the rules are mounted with subPath %q: subPath mounts never see ConfigMap updates", vm.SubPath)
		}
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil {
				configMount = v.ConfigMap.Name
			}
		}
	}
	if configMount == "" {
		t.Fatalf("--config %q is no ConfigMap mount of the container", cfgPath)
	}
	cms := map[string]configMap{}
	for _, m := range byKind(ms, "ConfigMap") {
		var cm configMap
		m.decode(t, &cm)
		cms[m.head.Metadata.Name] = cm
	}
	cm, ok := cms[configMount]
	if !ok {
		t.Fatalf("the rules volume mounts ConfigMap %q, which no manifest defines", configMount)
	}
	loadRules(t, cm.Data)

	checkTokens(t, h, s, d, secrets)
	checkNetworkPolicy(t, ms, podLabels, c, grpcPort, httpPort)
	checkMemoryLimit(t, c)
}

// tokenSecret finds the Secret volume mounted where --auth-token-file
// points (as a folder, so rotations reach the pod) and returns the
// Secret's name and the file's key in it.
func tokenSecret(t *testing.T, h help, s settings, d deployment) (name, key string) {
	t.Helper()
	file := s.value(h, "auth-token-file")
	if file == "" {
		t.Fatal("--auth-token-file is not set: any pod that reaches floodgate may Reset any key")
	}
	c := d.Spec.Template.Spec.Containers[0]
	for _, vm := range c.VolumeMounts {
		if filepath.Dir(file) != vm.MountPath {
			continue
		}
		if vm.SubPath != "" {
			t.Errorf("the tokens are mounted with subPath %q: subPath mounts never see Secret updates", vm.SubPath)
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && v.Secret != nil {
				return v.Secret.SecretName, filepath.Base(file)
			}
		}
	}
	t.Fatalf("--auth-token-file %q is in no Secret volume the container mounts", file)
	return "", ""
}

// checkTokens: --auth-token-file is a file of a Secret the manifests
// define, and it parses as floodgate's token file with an admin token.
func checkTokens(t *testing.T, h help, s settings, d deployment, secrets map[string]secret) {
	t.Helper()
	name, key := tokenSecret(t, h, s, d)
	sec, ok := secrets[name]
	if !ok {
		t.Fatalf("the tokens come from Secret %q, which no manifest defines", name)
	}
	text, ok := sec.StringData[key]
	if !ok {
		t.Fatalf("Secret %s has no stringData key %q", name, key)
	}
	admin := false
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(strings.Split(line, "#")[0])
		if len(fields) > 1 && slices.Contains(fields[1:], "admin") {
			admin = true
		}
	}
	if !admin {
		t.Errorf("Secret %s: no admin token, so no one could Reset a key", name)
	}
}

// checkNetworkPolicy: a NetworkPolicy selects the pods and admits ingress
// only from named peers, to container ports.
func checkNetworkPolicy(t *testing.T, ms []manifest, podLabels map[string]string, c container, grpcPort, httpPort int) {
	t.Helper()
	covered := map[int]bool{}
	for _, m := range byKind(ms, "NetworkPolicy") {
		var np networkPolicy
		m.decode(t, &np)
		if !subset(np.Spec.PodSelector.MatchLabels, podLabels) {
			continue
		}
		if !slices.Contains(np.Spec.PolicyTypes, "Ingress") {
			t.Errorf("%s: policyTypes %v lacks Ingress", m, np.Spec.PolicyTypes)
		}
		for i, rule := range np.Spec.Ingress {
			if len(rule.From) == 0 {
				t.Errorf("%s: ingress rule %d has no from: it admits every peer", m, i)
			}
			for _, f := range rule.From {
				if f.PodSelector == nil && f.IPBlock == nil && (f.NamespaceSelector == nil || len(f.NamespaceSelector.MatchLabels) == 0) {
					t.Errorf("%s: ingress rule %d admits every pod of every namespace", m, i)
				}
			}
			if len(rule.Ports) == 0 {
				t.Errorf("%s: ingress rule %d names no port: it opens them all", m, i)
			}
			for _, p := range rule.Ports {
				covered[portOf(t, p.Port, c)] = true
			}
		}
	}
	if len(covered) == 0 {
		t.Fatal("no NetworkPolicy selects the floodgate pods: every pod in the cluster can call them")
	}
	if !covered[grpcPort] || !covered[httpPort] {
		t.Errorf("the NetworkPolicy admits ports %v; want the gRPC port %d (clients) and the admin port %d (Prometheus)", slices.Sorted(maps.Keys(covered)), grpcPort, httpPort)
	}
}

// checkMemoryLimit: GOMEMLIMIT leaves the container headroom below its
// memory limit: between 75% and 90% of it.
func checkMemoryLimit(t *testing.T, c container) {
	t.Helper()
	limit, err := quantityBytes(c.Resources.Limits["memory"])
	if err != nil {
		t.Fatalf("limits.memory: %v", err)
	}
	var soft string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			if e.Value == nil {
				t.Fatal("GOMEMLIMIT is not a literal value (resourceFieldRef gives the whole limit, leaving no headroom)")
			}
			soft = *e.Value
		}
	}
	if soft == "" {
		t.Fatal("GOMEMLIMIT is not set")
	}
	b, err := quantityBytes(soft)
	if err != nil {
		t.Fatalf("GOMEMLIMIT: %v", err)
	}
	if r := float64(b) / float64(limit); r < 0.75 || r > 0.90 {
		t.Errorf("GOMEMLIMIT %s is %.0f%% of limits.memory %s; want 75%%-90%%, leaving headroom for memory outside the Go heap", soft, 100*r, c.Resources.Limits["memory"])
	}
}

// quantityBytes parses a Kubernetes memory quantity (256Mi, 1Gi, 500M)
// or a GOMEMLIMIT value (218MiB, 1GiB, 123456).
func quantityBytes(q string) (int64, error) {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
		{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"B", 1}, {"", 1},
	} {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%q: %w", q, err)
			}
			return v * u.mult, nil
		}
	}
	return 0, fmt.Errorf("%q: unknown unit", q)
}

// loadRules writes a ConfigMap's data as the kubelet mounts it (files
// that are symlinks into a hidden, timestamped folder), then loads it with
// rules.Parse file by file, rules.Load as a folder and the binary's
// `config validate`, and returns the folder.
func loadRules(t *testing.T, data map[string]string) string {
	t.Helper()
	if len(data) == 0 {
		t.Fatal("the ConfigMap has no data")
	}
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range data {
		if _, err := rules.Parse(name, []byte(text)); err != nil {
			t.Errorf("ConfigMap key %s: rules.Parse: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(ts, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	cfg, err := rules.Load(dir)
	if err != nil {
		t.Fatalf("config.Load of the ConfigMap: %v", err)
	}
	if len(cfg.Files()) != len(data) {
		t.Errorf("config.Load read %d files of the ConfigMap's %d", len(cfg.Files()), len(data))
	}
	validate(t, dir)
	return dir
}

// validate runs `floodgate config validate path`.
func validate(t *testing.T, path string) {
	t.Helper()
	out, err := exec.Command(floodgateBinary(t), "config", "validate", path).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok: ") {
		t.Errorf("floodgate config validate %s: %v\n%s", path, err, out)
	}
}

// TestKubernetesPodServes starts the binary as the Deployment runs it
// (its args and literal env; the ConfigMap as mounted; loopback ports and
// the embedded store instead of the Secret's Redis) and asks its probes.
func TestKubernetesPodServes(t *testing.T) {
	h := serveHelp(t)
	ms, _ := k8sManifests(t)
	var d deployment
	byKind(ms, "Deployment")[0].decode(t, &d)
	c := d.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		if e.Value != nil {
			env[e.Name] = *e.Value
		}
	}
	var cm configMap
	for _, m := range byKind(ms, "ConfigMap") {
		m.decode(t, &cm)
	}
	env["FLOODGATE_CONFIG"] = loadRules(t, cm.Data)
	// The token Secret, as the kubelet mounts it.
	name, key := tokenSecret(t, h, settings{args: c.Args[1:], env: env}, d)
	for _, m := range byKind(ms, "Secret") {
		var sec secret
		m.decode(t, &sec)
		if m.head.Metadata.Name == name {
			file := filepath.Join(t.TempDir(), key)
			if err := os.WriteFile(file, []byte(sec.StringData[key]), 0o600); err != nil {
				t.Fatal(err)
			}
			env["FLOODGATE_AUTH_TOKEN_FILE"] = file
		}
	}
	cfg, err := rules.Load(env["FLOODGATE_CONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, c.Args[1:], env)
	if got := srv.loaded; got["policies"] != float64(len(cfg.Policies())) || got["domains"] != float64(len(cfg.Domains())) {
		t.Errorf("the server logged config loaded %v; want %d policies, %d domains", got, len(cfg.Policies()), len(cfg.Domains()))
	}
	for _, p := range []*probe{c.LivenessProbe, c.ReadinessProbe} {
		srv.get(t, p.HTTPGet.Path)
	}
	srv.get(t, "/metrics")
	srv.stop(t, h, settings{args: c.Args[1:], env: env})
}

// server is a running floodgate serve.
type server struct {
	cmd      *exec.Cmd
	httpAddr string
	loaded   map[string]any // the "config loaded" log record
	logs     chan map[string]any
	exited   chan struct{} // closed when the process has exited
	err      error         // its exit status, once exited is closed
	stopped  bool          // stop has seen it exit
}

// startServe runs floodgate serve with args and env (JSON logs; listen
// addresses replaced by free loopback ports; FLOODGATE_REDIS_URL dropped,
// for the embedded store) until it logs "serving".
func startServe(t *testing.T, args []string, env map[string]string) *server {
	t.Helper()
	cmd := exec.Command(floodgateBinary(t), append([]string{"serve"}, args...)...)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	for k, v := range env {
		switch k {
		case "FLOODGATE_GRPC_ADDR", "FLOODGATE_HTTP_ADDR", "FLOODGATE_REDIS_URL", "FLOODGATE_LOG_FORMAT":
			continue
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "FLOODGATE_GRPC_ADDR=127.0.0.1:0", "FLOODGATE_HTTP_ADDR=127.0.0.1:0", "FLOODGATE_LOG_FORMAT=json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, logs: make(chan map[string]any, 64), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec map[string]any
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				rec = map[string]any{"msg": "(not JSON) " + sc.Text()}
			}
			s.logs <- rec
		}
		close(s.logs)
		s.err = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		if !s.stopped {
			_ = cmd.Process.Kill()
			for range s.logs {
			}
			<-s.exited
		}
	})
	// Bounded so that a server that never comes up fails the test rather
	// than hanging it; not a speed assertion.
	deadline := time.After(30 * time.Second)
	for {
		select {
		case rec, ok := <-s.logs:
			if !ok {
				<-s.exited
				t.Fatalf("floodgate serve exited before serving: %v", s.err)
			}
			switch rec["msg"] {
			case "config loaded":
				s.loaded = rec
			case "serving":
				addr, _ := rec["http"].(string)
				if addr == "" {
					t.Fatalf("serving without an HTTP admin address: %v", rec)
				}
				s.httpAddr = addr
				return s
			}
			if lvl, _ := rec["level"].(string); lvl == "ERROR" {
				t.Errorf("floodgate serve logged an error: %v", rec)
			}
		case <-deadline:
			t.Fatal("floodgate serve did not log serving within 30s")
		}
	}
}

// get asks the admin server for path and wants 200.
func (s *server) get(t *testing.T, path string) {
	t.Helper()
	resp, err := http.Get("http://" + s.httpAddr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
}

// stop sends SIGTERM, as the kubelet and docker do, and wants a clean exit
// that logs "stopped".
func (s *server) stop(t *testing.T, h help, cfg settings) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := false
	for rec := range s.logs {
		if rec["msg"] == "stopped" {
			stopped = true
		}
	}
	<-s.exited
	s.stopped = true
	if s.err != nil {
		t.Errorf("floodgate serve after SIGTERM: %v", s.err)
	}
	if !stopped {
		t.Errorf("floodgate serve exited without logging stopped (drain timeout %s)", cfg.value(h, "drain-timeout"))
	}
}

// ---------------------------------------------------------------------
// compose

// composeFile is the part of compose.yaml the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string            `yaml:"context"`
		Dockerfile string            `yaml:"dockerfile"`
		Args       map[string]string `yaml:"args"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	DependsOn   yaml.Node         `yaml:"depends_on"`
	ReadOnly    bool              `yaml:"read_only"`
}

// mount is a short-syntax bind mount.
type mount struct{ src, dst string }

func (s composeService) mounts(t *testing.T) []mount {
	t.Helper()
	var out []mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			t.Errorf("volume %q: want SRC:DST[:MODE]", v)
			continue
		}
		out = append(out, mount{src: parts[0], dst: parts[1]})
	}
	return out
}

// dependsOn lists the services s depends on (list or map form).
func (s composeService) dependsOn() []string {
	var out []string
	n := s.DependsOn
	switch n.Kind {
	case yaml.SequenceNode:
		for _, c := range n.Content {
			out = append(out, c.Value)
		}
	case yaml.MappingNode:
		for i := 0; i < len(n.Content); i += 2 {
			out = append(out, n.Content[i].Value)
		}
	}
	return out
}

// readCompose parses compose/compose.yaml (every YAML file of compose/ must
// parse; this one is the compose file).
func readCompose(t *testing.T) composeFile {
	t.Helper()
	for _, f := range yamlFiles(t, "compose") {
		decodeAll(t, f)
	}
	docs := decodeAll(t, filepath.Join("compose", "compose.yaml"))
	if len(docs) != 1 {
		t.Fatalf("compose.yaml: %d documents", len(docs))
	}
	var cf composeFile
	if err := docs[0].Decode(&cf); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return cf
}

// envoyEndpoint is one upstream address of envoy.yaml.
type envoyEndpoint struct {
	cluster string
	host    string
	port    int
}

// envoyAddrs reads envoy.yaml's listener ports and cluster endpoints.
func envoyAddrs(t *testing.T, file string) (listeners []int, endpoints []envoyEndpoint) {
	t.Helper()
	var b struct {
		StaticResources struct {
			Listeners []struct {
				Address struct {
					SocketAddress struct {
						PortValue int `yaml:"port_value"`
					} `yaml:"socket_address"`
				} `yaml:"address"`
			} `yaml:"listeners"`
			Clusters []struct {
				Name           string `yaml:"name"`
				LoadAssignment struct {
					Endpoints []struct {
						LbEndpoints []struct {
							Endpoint struct {
								Address struct {
									SocketAddress struct {
										Address   string `yaml:"address"`
										PortValue int    `yaml:"port_value"`
									} `yaml:"socket_address"`
								} `yaml:"address"`
							} `yaml:"endpoint"`
						} `yaml:"lb_endpoints"`
					} `yaml:"endpoints"`
				} `yaml:"load_assignment"`
			} `yaml:"clusters"`
		} `yaml:"static_resources"`
	}
	docs := decodeAll(t, file)
	if err := docs[0].Decode(&b); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, l := range b.StaticResources.Listeners {
		listeners = append(listeners, l.Address.SocketAddress.PortValue)
	}
	for _, c := range b.StaticResources.Clusters {
		for _, e := range c.LoadAssignment.Endpoints {
			for _, lb := range e.LbEndpoints {
				sa := lb.Endpoint.Address.SocketAddress
				endpoints = append(endpoints, envoyEndpoint{c.Name, sa.Address, sa.PortValue})
			}
		}
	}
	return listeners, endpoints
}

// TestCompose: the floodgate service is the Dockerfile's image with real
// flags and variables; what it and Envoy mount exists and loads; Envoy's
// clusters name compose services on the ports they listen on; Redis is
// the service the URL names.
func TestCompose(t *testing.T) {
	h := serveHelp(t)
	cf := readCompose(t)
	fg, ok := cf.Services["floodgate"]
	if !ok {
		t.Fatalf("no floodgate service (services: %v)", slices.Sorted(maps.Keys(cf.Services)))
	}
	for _, name := range []string{"envoy", "redis"} {
		if _, ok := cf.Services[name]; !ok {
			t.Errorf("no %s service", name)
		}
	}

	// Built from the repository's Dockerfile.
	if fg.Build == nil {
		t.Fatal("floodgate: no build section")
	}
	ctxDir := filepath.Join("compose", fg.Build.Context)
	if abs, _ := filepath.Abs(ctxDir); abs != mustAbs(t, repoRoot) {
		t.Errorf("floodgate build context %s is not the repository root", fg.Build.Context)
	}
	df := fg.Build.Dockerfile
	if df == "" {
		df = "Dockerfile"
	}
	if _, err := os.Stat(filepath.Join(ctxDir, df)); err != nil {
		t.Errorf("floodgate build: %v", err)
	}
	for arg := range fg.Build.Args {
		if _, ok := buildVars()[arg]; !ok {
			t.Errorf("build arg %s: not one the Dockerfile's build uses", arg)
		}
	}

	// Flags and variables; the image's ENV fills what compose leaves out.
	stages := readDockerfile(t)
	env := dockerEnv(t, stages[len(stages)-1])
	for k, v := range fg.Environment {
		env[k] = v
	}
	if len(fg.Command) == 0 || fg.Command[0] != "serve" {
		t.Fatalf("floodgate command %q: want serve first (the entrypoint is /floodgate)", fg.Command)
	}
	s := settings{args: fg.Command[1:], env: env}
	s.check(t, "compose floodgate", h)
	grpcPort := s.port(t, h, "grpc-addr")
	httpPort := s.port(t, h, "http-addr")
	for _, p := range []int{grpcPort, httpPort} {
		if !slices.ContainsFunc(fg.Ports, func(m string) bool { return strings.HasSuffix(m, ":"+strconv.Itoa(p)) }) {
			t.Errorf("floodgate ports %v do not publish %d", fg.Ports, p)
		}
	}

	// Every bind mount's source exists; floodgate's config is one of them
	// and loads.
	cfgPath := s.value(h, "config")
	var cfgSrc string
	for name, svc := range cf.Services {
		for _, m := range svc.mounts(t) {
			src := filepath.Join("compose", m.src)
			if _, err := os.Stat(src); err != nil {
				t.Errorf("service %s mounts %s: %v", name, m.src, err)
			}
			if name == "floodgate" && m.dst == cfgPath {
				cfgSrc = src
			}
		}
	}
	if cfgSrc == "" {
		t.Fatalf("floodgate's --config %q is not a mount", cfgPath)
	}
	if _, err := rules.Load(cfgSrc); err != nil {
		t.Errorf("config.Load(%s): %v", cfgSrc, err)
	}
	validate(t, cfgSrc)

	// Redis: the service the URL names.
	u, err := url.Parse(env["FLOODGATE_REDIS_URL"])
	if err != nil {
		t.Fatalf("FLOODGATE_REDIS_URL: %v", err)
	}
	if rs, ok := cf.Services[u.Hostname()]; !ok || !strings.HasPrefix(rs.Image, "redis:") {
		t.Errorf("FLOODGATE_REDIS_URL %s names %q, not a redis service", u, u.Hostname())
	}
	if !slices.Contains(fg.dependsOn(), u.Hostname()) {
		t.Errorf("floodgate does not depend on %s", u.Hostname())
	}

	// Envoy loads the mounted envoy.yaml, whose clusters are compose
	// services on the ports they listen on, and its listeners are published.
	envoy := cf.Services["envoy"]
	var envoyCfg string
	for _, m := range envoy.mounts(t) {
		if slices.Contains(envoy.Command, m.dst) || len(envoy.Command) == 0 && m.dst == "/etc/envoy/envoy.yaml" {
			envoyCfg = filepath.Join("compose", m.src)
		}
	}
	if envoyCfg == "" {
		t.Fatalf("envoy: no mount is the config its command (%q) loads", envoy.Command)
	}
	listeners, endpoints := envoyAddrs(t, envoyCfg)
	for _, p := range listeners {
		if !slices.ContainsFunc(envoy.Ports, func(m string) bool { return strings.HasSuffix(m, ":"+strconv.Itoa(p)) }) {
			t.Errorf("envoy listens on %d, which its ports %v do not publish", p, envoy.Ports)
		}
	}
	if len(endpoints) == 0 {
		t.Fatalf("%s has no cluster endpoints", envoyCfg)
	}
	for _, e := range endpoints {
		svc, ok := cf.Services[e.host]
		if !ok {
			t.Errorf("envoy cluster %s sends to %s, which is no compose service", e.cluster, e.host)
			continue
		}
		if !slices.Contains(envoy.dependsOn(), e.host) {
			t.Errorf("envoy does not depend on %s", e.host)
		}
		if e.host == "floodgate" {
			if e.port != grpcPort {
				t.Errorf("envoy cluster %s: port %d; floodgate's gRPC listens on %d", e.cluster, e.port, grpcPort)
			}
			continue
		}
		if cmd := strings.Join(svc.Command, " "); !strings.Contains(cmd, ":"+strconv.Itoa(e.port)) {
			t.Errorf("envoy cluster %s: port %d; service %s's command %q does not listen there", e.cluster, e.port, e.host, cmd)
		}
	}
}

// TestComposeFloodgateServes starts the binary with the compose service's
// command, environment and config (loopback ports; the embedded store in
// place of the redis service, which only compose can resolve) and asks
// its probes.
func TestComposeFloodgateServes(t *testing.T) {
	h := serveHelp(t)
	cf := readCompose(t)
	fg := cf.Services["floodgate"]
	env := map[string]string{}
	for k, v := range fg.Environment {
		env[k] = v
	}
	cfgPath := env["FLOODGATE_CONFIG"]
	for _, m := range fg.mounts(t) {
		if m.dst == cfgPath {
			env["FLOODGATE_CONFIG"] = mustAbs(t, filepath.Join("compose", m.src))
		}
	}
	srv := startServe(t, fg.Command[1:], env)
	srv.get(t, "/healthz")
	srv.get(t, "/readyz")
	srv.stop(t, h, settings{args: fg.Command[1:], env: env})
}

// intOrUnset formats an optional integer.
func intOrUnset(p *int) string {
	if p == nil {
		return "(unset)"
	}
	return strconv.Itoa(*p)
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
