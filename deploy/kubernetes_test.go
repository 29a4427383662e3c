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
	"time"

	"github.com/floodgate/floodgate/internal/rules"
)

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
	if uid := dockerUID(t, readDockerfile(t).final()); psc.RunAsUser != nil && *psc.RunAsUser != uid {
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
	cfg, err := rules.Load(dir, rules.Options{})
	if err != nil {
		t.Fatalf("config.Load of the ConfigMap: %v", err)
	}
	if len(cfg.Files()) != len(data) {
		t.Errorf("config.Load read %d files of the ConfigMap's %d", len(cfg.Files()), len(data))
	}
	validate(t, dir)
	return dir
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
	cfg, err := rules.Load(env["FLOODGATE_CONFIG"], rules.Options{})
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
