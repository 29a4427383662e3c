package deploy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

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
