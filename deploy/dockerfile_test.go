package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// dockerfile is a Dockerfile as BuildKit's own parser reads it.
type dockerfile struct {
	stages []instructions.Stage
	escape rune // the escape character: \ unless a parser directive says otherwise
}

// final is the last stage, the image docker build makes.
func (d dockerfile) final() instructions.Stage { return d.stages[len(d.stages)-1] }

// lexer is BuildKit's shell word lexer with the file's escape character:
// what Docker expands and splits instruction arguments with.
func (d dockerfile) lexer() *shell.Lex { return shell.NewLex(d.escape) }

// parseDockerfile parses a Dockerfile with BuildKit's parser, the one
// docker build uses. A warning of the parser or of the linter checks it
// runs while parsing fails too: Docker would build such a file, but warn.
// A "# check=skip=RULE" directive is honoured, as docker build does.
func parseDockerfile(data []byte) (dockerfile, error) {
	res, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		return dockerfile{}, fmt.Errorf("Dockerfile: %w", err)
	}
	var warnings []error
	for _, w := range res.Warnings {
		line := 0
		if w.Location != nil {
			line = w.Location.Start.Line
		}
		warnings = append(warnings, fmt.Errorf("Dockerfile:%d: %s", line, w.Short))
	}
	checks, _, _, _ := parser.ParseDirective("check", data)
	lintConfig, err := linter.ParseLintOptions(checks)
	if err != nil {
		return dockerfile{}, fmt.Errorf("Dockerfile: # check=%s: %w", checks, err)
	}
	lintConfig.Warn = func(rule, _, _, msg string, loc []parser.Range) {
		warnings = append(warnings, fmt.Errorf("Dockerfile:%d: %s: %s", rangeLine(loc), rule, msg))
	}
	stages, _, err := instructions.Parse(res.AST, linter.New(lintConfig))
	if err != nil {
		return dockerfile{}, fmt.Errorf("Dockerfile: %w", err)
	}
	if err := errors.Join(warnings...); err != nil {
		return dockerfile{}, err
	}
	if len(stages) == 0 {
		return dockerfile{}, errors.New("Dockerfile: no FROM")
	}
	return dockerfile{stages: stages, escape: res.EscapeToken}, nil
}

// rangeLine is the first line of a location.
func rangeLine(loc []parser.Range) int {
	if len(loc) == 0 {
		return 0
	}
	return loc[0].Start.Line
}

// lineOf is the line an instruction starts on.
func lineOf(c instructions.Command) int { return rangeLine(c.Location()) }

// commands returns the stage's instructions of type C, in order.
func commands[C instructions.Command](s instructions.Stage) []C {
	var out []C
	for _, c := range s.Commands {
		if c, ok := c.(C); ok {
			out = append(out, c)
		}
	}
	return out
}

// readDockerfile parses the repository's Dockerfile.
func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df, err := parseDockerfile(data)
	if err != nil {
		t.Fatal(err)
	}
	return df
}

// path resolves p against the directory dir, as WORKDIR and COPY do.
func path(dir, p string) string {
	if strings.HasPrefix(p, "/") {
		return filepath.Clean(p)
	}
	return filepath.Clean(dir + "/" + p)
}

// TestDockerfile: the Dockerfile builds a static, trimmed, versioned
// ./cmd/floodgate in a golang:1.26 stage and runs it as a non-root user on
// a minimal image, with the listen addresses open to the container's
// network and the ports exposed.
func TestDockerfile(t *testing.T) {
	df := readDockerfile(t)
	if len(df.stages) < 2 {
		t.Fatalf("%d stage(s); want a builder and a final stage", len(df.stages))
	}
	b, err := dockerBuild(df, buildVars())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.stage.BaseName, "golang:1.26") {
		t.Errorf("the builder is FROM %s; want golang:1.26 (go.mod's go line)", b.stage.BaseName)
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
	for _, c := range b.stage.Commands {
		switch c := c.(type) {
		case *instructions.WorkdirCommand:
			workdir = path(workdir, c.Path)
		case *instructions.CopyCommand:
			if c.From == "" && slices.Equal(c.SourcePaths, []string{"."}) {
				copied = path(workdir, c.DestPath) == b.workdir
			}
		}
	}
	if !copied {
		t.Errorf("the builder stage has no COPY . %s (the context into go build's working directory)", b.workdir)
	}

	final := df.final()
	if !strings.HasPrefix(final.BaseName, "gcr.io/distroless/static") && final.BaseName != "scratch" {
		t.Errorf("the final stage is FROM %s; want gcr.io/distroless/static-debian12:nonroot or scratch", final.BaseName)
	}
	copies := commands[*instructions.CopyCommand](final)
	if final.BaseName == "scratch" {
		if !slices.ContainsFunc(copies, func(c *instructions.CopyCommand) bool {
			return slices.ContainsFunc(c.SourcePaths, func(src string) bool { return strings.Contains(src, "ca-certificates") })
		}) {
			t.Error("a scratch image needs CA certificates for rediss:// and TLS")
		}
	}
	if uid := dockerUID(t, final); uid == 0 {
		t.Error("the final stage runs as root")
	}
	if b.stage.Name == "" || !slices.ContainsFunc(copies, func(c *instructions.CopyCommand) bool {
		return c.From == b.stage.Name && slices.Equal(c.SourcePaths, []string{b.out}) && c.DestPath == "/floodgate"
	}) {
		t.Errorf("the final stage's COPYs %v; want COPY --from=%s %s /floodgate", copies, b.stage.Name, b.out)
	}
	if got := execForm(t, final, "ENTRYPOINT"); !slices.Equal(got, []string{"/floodgate"}) {
		t.Errorf("ENTRYPOINT %q; want [\"/floodgate\"]", got)
	}
	if got := execForm(t, final, "CMD"); !slices.Equal(got, []string{"serve"}) {
		t.Errorf("CMD %q; want [\"serve\"]", got)
	}
	env := dockerEnv(t, df, final)
	var exposed []string
	for _, e := range commands[*instructions.ExposeCommand](final) {
		exposed = append(exposed, e.Ports...)
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
func dockerUID(t *testing.T, s instructions.Stage) int {
	t.Helper()
	users := commands[*instructions.UserCommand](s)
	if len(users) == 0 {
		if strings.HasSuffix(s.BaseName, ":nonroot") {
			return 65532
		}
		t.Fatalf("the final stage (FROM %s) sets no USER", s.BaseName)
	}
	user := users[len(users)-1].User
	u, _, _ := strings.Cut(user, ":")
	uid, err := strconv.Atoi(u)
	if err != nil {
		t.Fatalf("USER %s: want a numeric UID (runAsNonRoot cannot check a name)", user)
	}
	return uid
}

// execForm is the command line of the stage's last ENTRYPOINT or CMD
// (name says which), which must be in the exec (JSON) form; nil if the
// stage has none.
func execForm(t *testing.T, s instructions.Stage, name string) []string {
	t.Helper()
	var last *instructions.ShellDependantCmdLine
	var code string
	for _, c := range s.Commands {
		if !strings.EqualFold(c.Name(), name) {
			continue
		}
		switch c := c.(type) {
		case *instructions.EntrypointCommand:
			last, code = &c.ShellDependantCmdLine, c.String()
		case *instructions.CmdCommand:
			last, code = &c.ShellDependantCmdLine, c.String()
		}
	}
	if last == nil {
		return nil
	}
	if last.PrependShell {
		t.Errorf("%s: not the exec (JSON) form", code)
		return nil
	}
	return last.CmdLine
}

// dockerEnv is the stage's ENV, its values unquoted as Docker does. A
// value that refers to a variable fails the test: the tests read ENV as
// literal values.
func dockerEnv(t *testing.T, df dockerfile, s instructions.Stage) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, c := range commands[*instructions.EnvCommand](s) {
		for _, kv := range c.Env {
			var refs lexEnv
			v, _, err := df.lexer().ProcessWord(kv.Value, &refs)
			if err != nil {
				t.Fatalf("Dockerfile:%d: %s: %v", lineOf(c), c, err)
			}
			if len(refs.asked) > 0 {
				t.Fatalf("Dockerfile:%d: %s: $%s in ENV", lineOf(c), c, refs.asked[0])
			}
			env[kv.Key] = v
		}
	}
	return env
}

// lexEnv is the environment BuildKit's lexer expands variables from: the
// names in vars, and it records every name it is asked for that is not
// there.
type lexEnv struct {
	vars  map[string]string
	asked []string // the names asked for and not found, in order
}

// Get implements shell.EnvGetter.
func (e *lexEnv) Get(name string) (string, bool) {
	v, ok := e.vars[name]
	if !ok && !slices.Contains(e.asked, name) {
		e.asked = append(e.asked, name)
	}
	return v, ok
}

// Keys implements shell.EnvGetter.
func (e *lexEnv) Keys() []string {
	return slices.Sorted(maps.Keys(e.vars))
}
