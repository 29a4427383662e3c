package deploy_test

import (
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
)

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
