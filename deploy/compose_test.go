package deploy_test

import (
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/floodgate/floodgate/internal/rules"
)

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
	image := readDockerfile(t)
	env := dockerEnv(t, image, image.final())
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
	if _, err := rules.Load(cfgSrc, rules.Options{}); err != nil {
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
