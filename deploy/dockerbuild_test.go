package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
)

// goBuild is the go build command of the Dockerfile's builder stage.
type goBuild struct {
	stage   instructions.Stage
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
func dockerBuild(df dockerfile, vars map[string]string) (*goBuild, error) {
	var found *goBuild
	for _, s := range df.stages {
		declared := map[string]bool{}
		workdir := "/"
		for _, c := range s.Commands {
			switch c := c.(type) {
			case *instructions.ArgCommand:
				for _, a := range c.Args {
					declared[a.Key] = true
				}
			case *instructions.WorkdirCommand:
				workdir = path(workdir, c.Path)
			case *instructions.RunCommand:
				if !strings.Contains(strings.Join(c.CmdLine, " "), "go build") {
					continue
				}
				if found != nil {
					return nil, fmt.Errorf("Dockerfile:%d: a second RUN with go build", lineOf(c))
				}
				words, err := runWords(df, c, declared, vars)
				if err != nil {
					return nil, err
				}
				b, err := parseGoBuild(words)
				if err != nil {
					return nil, fmt.Errorf("Dockerfile:%d: %w", lineOf(c), err)
				}
				b.stage, b.workdir = s, workdir
				found = b
			}
		}
	}
	if found == nil {
		return nil, errors.New("the Dockerfile has no RUN with go build")
	}
	return found, nil
}

// runWords is the command a RUN runs, as words: the exec form as written;
// the shell form split and expanded by BuildKit's shell lexer, with the
// build arguments the stage declared before it. A shell form that is more
// than one simple command (a word holding ; & | ` ( ) < or >, quoted or
// not) is refused rather than misread.
func runWords(df dockerfile, c *instructions.RunCommand, declared map[string]bool, vars map[string]string) ([]string, error) {
	line := lineOf(c)
	if len(c.Files) > 0 {
		return nil, fmt.Errorf("Dockerfile:%d: a RUN with a heredoc is not understood by this test", line)
	}
	if !c.PrependShell {
		return c.CmdLine, nil
	}
	env := lexEnv{vars: map[string]string{}}
	for name := range declared {
		if v, ok := vars[name]; ok {
			env.vars[name] = v
		}
	}
	words, err := df.lexer().ProcessWords(strings.Join(c.CmdLine, " "), &env)
	if err != nil {
		return nil, fmt.Errorf("Dockerfile:%d: %w", line, err)
	}
	if len(env.asked) > 0 { // the first name without a value
		name := env.asked[0]
		if !declared[name] {
			return nil, fmt.Errorf("Dockerfile:%d: $%s is not declared by an ARG before it in this stage", line, name)
		}
		return nil, fmt.Errorf("Dockerfile:%d: the test has no value for $%s", line, name)
	}
	for _, w := range words {
		if i := strings.IndexAny(w, ";&|`()<>"); i >= 0 {
			return nil, fmt.Errorf("Dockerfile:%d: RUN %s is more than one simple command (found %q)", line, c.CmdLine, w[i])
		}
	}
	return words, nil
}

// parseGoBuild reads [NAME=value ...] go build [flags] [packages].
func parseGoBuild(words []string) (*goBuild, error) {
	b := &goBuild{flags: map[string]string{}}
	for len(words) > 0 && envAssign.MatchString(words[0]) {
		b.env = append(b.env, words[0])
		words = words[1:]
	}
	if len(words) < 2 || words[0] != "go" || words[1] != "build" {
		return nil, fmt.Errorf("want [NAME=value ...] go build ..., got %q", words)
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
				return nil, fmt.Errorf("%s without a value", a)
			}
			i++
			val = rest[i]
		}
		b.flags[name] = val
	}
	b.out = b.flags["o"]
	return b, nil
}

// buildVars are the build arguments the test builds with: the host's
// platform for Docker's automatic TARGETOS/TARGETARCH.
func buildVars() map[string]string {
	return map[string]string{"VERSION": testVersion, "TARGETOS": runtime.GOOS, "TARGETARCH": runtime.GOARCH, "BUILDPLATFORM": runtime.GOOS + "/" + runtime.GOARCH}
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
		if !ignore.excluded(t, must) {
			t.Errorf(".dockerignore keeps %s in the build context", must)
		}
	}
	for _, keep := range []string{"go.mod", "go.sum", "cmd/floodgate/main.go", "internal/rules/load.go"} {
		if ignore.excluded(t, keep) {
			t.Errorf(".dockerignore excludes %s, which the build needs", keep)
		}
	}
	ctxDir := filepath.Join(t.TempDir(), "context")
	copyContext(t, ignore, ctxDir)
	// Every file a COPY of the builder stage names is in the context.
	for _, c := range commands[*instructions.CopyCommand](b.stage) {
		if c.From != "" {
			continue
		}
		for _, src := range c.SourcePaths {
			if _, err := os.Stat(filepath.Join(ctxDir, src)); err != nil {
				t.Errorf("Dockerfile:%d: COPY %s: not in the build context: %v", lineOf(c), src, err)
			}
		}
	}
	skipBuildUnderShort(t)
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
	// Calendar quotas resolve IANA zones (time_zone: Asia/Jakarta) in an
	// image that may hold no /usr/share/zoneinfo: the binary embeds the
	// zone database (time/tzdata).
	// The build line strips symbols, so look for the database itself: a
	// zip whose first entry is Africa/Abidjan, a name nothing else holds.
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("Africa/Abidjan")) {
		t.Error("the binary does not embed time/tzdata: calendar limits' time zones would fail on the image")
	}
}
