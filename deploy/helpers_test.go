// Package deploy_test checks the deployment files statically, since no
// container engine runs where these tests do: the Dockerfile (its stages,
// its user, and its go build line, which the test runs on a copy of the
// build context .dockerignore leaves), the Kubernetes manifests in
// kubernetes/ and the compose file in compose/. Every FLOODGATE_* variable
// and --flag they use must be one `floodgate serve --help` lists, every
// rules file they mount must load, and the built binary is started with the
// Deployment's and the compose service's settings to show that their
// probes answer.
//
// One file per artefact: dockerfile_test.go (the image; the Dockerfile is
// read by BuildKit's own parser and shell lexer), dockerbuild_test.go (the
// go build line, run on the context that dockerignore_test.go copies with
// moby/patternmatcher), help_test.go (what serve --help lists),
// kubernetes_objects_test.go and kubernetes_test.go, compose_test.go,
// serve_test.go (a running floodgate serve); this file holds the helpers
// they share.
package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
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

// skipBuildUnderShort skips t under -short: building the binary takes
// longer than the inner loop may (make test runs without -short).
func skipBuildUnderShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("deploy: builds the floodgate binary, skipped under -short (run without -short, as make test does)")
	}
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
	skipBuildUnderShort(t)
	shared.once.Do(func() {
		data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
		if err != nil {
			shared.err = err
			return
		}
		df, err := parseDockerfile(data)
		if err != nil {
			shared.err = err
			return
		}
		b, err := dockerBuild(df, buildVars())
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

// validate runs `floodgate config validate path`.
func validate(t *testing.T, path string) {
	t.Helper()
	out, err := exec.Command(floodgateBinary(t), "config", "validate", path).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok: ") {
		t.Errorf("floodgate config validate %s: %v\n%s", path, err, out)
	}
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
