package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// The files under test.
const (
	dashboardFile = "grafana/floodgate.json"
	alertsFile    = "prometheus/alerts.yaml"
)

// ---------------------------------------------------------------------
// Grafana dashboard

// grafanaDashboard is the part of a Grafana dashboard the tests read.
type grafanaDashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []grafanaVariable `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

// grafanaDatasource is a panel's, target's or variable's data source.
type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// dashboardDatasource is the data source every query must use: the
// dashboard's datasource variable, so it works imported or provisioned.
var dashboardDatasource = grafanaDatasource{Type: "prometheus", UID: "${datasource}"}

// grafanaVariable is a template variable. Query is a string or, as the
// current Prometheus query editor saves it, {"query": "..."}.
type grafanaVariable struct {
	Name       string             `json:"name"`
	Type       string             `json:"type"`
	Datasource *grafanaDatasource `json:"datasource"`
	Query      json.RawMessage    `json:"query"`
}

// query returns the variable's query text.
func (v grafanaVariable) query() (string, error) {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s, nil
	}
	var q struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(v.Query, &q); err != nil {
		return "", fmt.Errorf("variable %s: query is neither a string nor {query}: %w", v.Name, err)
	}
	return q.Query, nil
}

// grafanaPanel is a panel; a row holds its panels only when collapsed.
type grafanaPanel struct {
	ID         int                `json:"id"`
	Type       string             `json:"type"`
	Title      string             `json:"title"`
	Datasource *grafanaDatasource `json:"datasource"`
	GridPos    struct {
		X int `json:"x"`
		Y int `json:"y"`
		W int `json:"w"`
		H int `json:"h"`
	} `json:"gridPos"`
	Targets []grafanaTarget `json:"targets"`
	Panels  []grafanaPanel  `json:"panels"`
}

// grafanaTarget is one query of a panel.
type grafanaTarget struct {
	RefID        string             `json:"refId"`
	Expr         string             `json:"expr"`
	LegendFormat string             `json:"legendFormat"`
	Datasource   *grafanaDatasource `json:"datasource"`
}

func readDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels returns the dashboard's panels, those of collapsed rows
// included, rows last.
func (d grafanaDashboard) allPanels() []grafanaPanel {
	var out []grafanaPanel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// variables returns the names of the dashboard's template variables.
func (d grafanaDashboard) variables() labelSet {
	s := labelSet{}
	for _, v := range d.Templating.List {
		s[v.Name] = true
	}
	return s
}

// labelValuesQuery matches Grafana's label_values(SELECTOR, LABEL).
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// TestDashboardStructure: the dashboard is JSON Grafana imports (a uid, a
// title, a schema version), picks its Prometheus through a datasource
// variable, has unique panel ids and a place on the grid for each panel,
// and every panel but rows has queries that use that data source, have
// unique refIds and parse as PromQL once Grafana's variables are expanded.
func TestDashboardStructure(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: want both", d.UID, d.Title)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d, want ≥ 36 (Grafana 9+)", d.SchemaVersion)
	}
	vars := d.variables()
	var hasDatasource bool
	for _, v := range d.Templating.List {
		q, err := v.query()
		if err != nil {
			t.Error(err)
			continue
		}
		switch v.Type {
		case "datasource":
			hasDatasource = hasDatasource || (v.Name == "datasource" && q == "prometheus")
		case "query":
			if v.Datasource == nil || *v.Datasource != dashboardDatasource {
				t.Errorf("variable %s: datasource %v, want %v", v.Name, v.Datasource, dashboardDatasource)
			}
			m := labelValuesQuery.FindStringSubmatch(q)
			if m == nil {
				t.Errorf("variable %s: query %q, want label_values(SELECTOR, LABEL)", v.Name, q)
				continue
			}
			expr, err := expandGrafana(m[1], vars)
			if err == nil {
				_, err = promQL.ParseExpr(expr)
			}
			if err != nil {
				t.Errorf("variable %s: %s: %v", v.Name, m[1], err)
			}
		default:
			t.Errorf("variable %s: type %q, want datasource or query", v.Name, v.Type)
		}
	}
	if !hasDatasource {
		t.Errorf(`no template variable {"name": "datasource", "type": "datasource", "query": "prometheus"}`)
	}

	ids := map[int]string{}
	panels := 0
	for _, p := range d.allPanels() {
		if p.ID <= 0 {
			t.Errorf("panel %q: id %d, want a positive id", p.Title, p.ID)
		} else if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v is off the 24-column grid", p.Title, g)
		}
		if p.Type == "row" {
			continue
		}
		panels++
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if p.Datasource == nil || *p.Datasource != dashboardDatasource {
			t.Errorf("panel %q: datasource %v, want %v", p.Title, p.Datasource, dashboardDatasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		refIDs := map[string]bool{}
		for _, tg := range p.Targets {
			where := fmt.Sprintf("panel %q query %s", p.Title, tg.RefID)
			if tg.RefID == "" || refIDs[tg.RefID] {
				t.Errorf("%s: refId empty or repeated", where)
			}
			refIDs[tg.RefID] = true
			if tg.Datasource == nil || *tg.Datasource != dashboardDatasource {
				t.Errorf("%s: datasource %v, want %v", where, tg.Datasource, dashboardDatasource)
			}
			expr, err := expandGrafana(tg.Expr, vars)
			if err == nil && strings.TrimSpace(expr) == "" {
				err = fmt.Errorf("no expr")
			}
			if err == nil {
				_, err = promQL.ParseExpr(expr)
			}
			if err != nil {
				t.Errorf("%s: %v", where, err)
			}
		}
	}
	if panels == 0 {
		t.Error("the dashboard has no panels")
	}
}

// ---------------------------------------------------------------------
// Prometheus alerting rules

// alertRuleFile is the rule file format Prometheus loads (rule_files).
type alertRuleFile struct {
	Groups []struct {
		Name     string      `yaml:"name"`
		Interval string      `yaml:"interval"`
		Rules    []alertRule `yaml:"rules"`
	} `yaml:"groups"`
}

// alertRule is one rule; Record is there so that a recording rule is
// reported as such, not as an unknown field.
type alertRule struct {
	Alert         string            `yaml:"alert"`
	Record        string            `yaml:"record"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for"`
	KeepFiringFor string            `yaml:"keep_firing_for"`
	Labels        map[string]string `yaml:"labels"`
	Annotations   map[string]string `yaml:"annotations"`
}

// readAlerts decodes the rule file, refusing fields Prometheus does not know.
func readAlerts(t *testing.T) alertRuleFile {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f alertRuleFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	return f
}

// alertSeverities are the values of the severity label routes may rely on.
var alertSeverities = map[string]bool{"critical": true, "warning": true, "info": true}

// alertAnnotations are the annotations every alert carries.
var alertAnnotations = []string{"summary", "description", "runbook"}

// prometheusTemplateFuncs names the functions Prometheus' alert templates
// have, so that text/template can parse a template that uses them.
var prometheusTemplateFuncs = func() template.FuncMap {
	m := template.FuncMap{}
	for _, name := range strings.Fields(`query first label value strvalue args reReplaceAll safeHtml match title
		toUpper toLower graphLink tableLink sortByLabel humanize humanize1024 humanizeDuration
		humanizePercentage humanizeTimestamp toTime toDuration now pathPrefix externalURL
		parseDuration stripPort stripDomain urlQueryEscape`) {
		m[name] = func(...any) any { return nil }
	}
	return m
}()

// TestAlertRulesStructure: the rule file has groups of alerting rules,
// each named once, with an expr that parses as PromQL, a for duration, a
// known severity label, and a summary, description and runbook whose
// templates parse as Prometheus parses them.
func TestAlertRulesStructure(t *testing.T) {
	f := readAlerts(t)
	if len(f.Groups) == 0 {
		t.Fatal("no groups")
	}
	names := map[string]bool{}
	for _, g := range f.Groups {
		if g.Name == "" || names["group "+g.Name] {
			t.Errorf("group %q: name empty or repeated", g.Name)
		}
		names["group "+g.Name] = true
		if len(g.Rules) == 0 {
			t.Errorf("group %q has no rules", g.Name)
		}
		for i, r := range g.Rules {
			where := fmt.Sprintf("group %q rule %d (%s)", g.Name, i, r.Alert)
			if r.Alert == "" || r.Record != "" {
				t.Errorf("%s: want an alerting rule (alert, no record)", where)
			}
			if names[r.Alert] {
				t.Errorf("%s: alert named twice", where)
			}
			names[r.Alert] = true
			if _, err := promQL.ParseExpr(r.Expr); err != nil {
				t.Errorf("%s: expr: %v", where, err)
			}
			if d, err := model.ParseDuration(r.For); err != nil || d <= 0 {
				t.Errorf("%s: for %q: want a positive duration (%v)", where, r.For, err)
			}
			if !alertSeverities[r.Labels["severity"]] {
				t.Errorf("%s: labels.severity %q, want one of critical, warning, info", where, r.Labels["severity"])
			}
			for _, a := range alertAnnotations {
				text := r.Annotations[a]
				if strings.TrimSpace(text) == "" {
					t.Errorf("%s: no annotations.%s", where, a)
					continue
				}
				const preamble = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
				if _, err := template.New(a).Funcs(prometheusTemplateFuncs).Parse(preamble + text); err != nil {
					t.Errorf("%s: annotations.%s: %v", where, a, err)
				}
			}
		}
	}
}

// ---------------------------------------------------------------------
// Against a running floodgate

// observedRules give the running binary a policy and an Envoy rule, so
// decisions of both APIs create their series.
const observedRules = `domain: obs
descriptors:
  - key: k
    rate_limit: {name: per_k, unit: hour, requests_per_unit: 1}
policies:
  obs_pol: {requests: 2, period: 1h}
`

// scrapeRunningFloodgate builds floodgate, serves it on loopback with the
// embedded store, makes decisions through gRPC (Check and
// ShouldRateLimit, Settle) and the HTTP/JSON API so their series exist, and
// returns a scrape of /metrics.
func scrapeRunningFloodgate(t *testing.T) exposition {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "floodgate")
	// deploy/ is a module of its own: build in the product's module.
	build := exec.Command("go", "build", "-o", bin, "./cmd/floodgate")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building floodgate: %v\n%s", err, out)
	}
	rulesPath := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesPath, []byte(observedRules), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--log-format", "json", "--config", rulesPath, "--limited-metrics-keys", "3")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	serving := make(chan map[string]any, 1)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n") // read only after exit or a timeout
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "serving" {
				serving <- rec
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("floodgate exited with %v after SIGTERM", err)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("floodgate did not stop within 20s of SIGTERM")
		}
	})
	var grpcAddr, httpAddr string
	select {
	case rec := <-serving:
		grpcAddr, _ = rec["grpc"].(string)
		httpAddr, _ = rec["http"].(string)
	case err := <-exited:
		exited <- err // for the cleanup
		t.Fatalf("floodgate exited before serving: %v\n%s", err, logs.String())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("floodgate did not serve within 30s")
	}

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := floodgatev1.NewRateLimiterClient(conn)
	for i, want := range []bool{true, true, false} { // the second is near the limit
		resp, err := check.Check(ctx, &floodgatev1.CheckRequest{Key: "a", Source: &floodgatev1.CheckRequest_Policy{Policy: "obs_pol"}})
		if err != nil || resp.Allowed != want {
			t.Fatalf("Check %d: %v %v, want allowed=%v", i, resp, err, want)
		}
	}
	// A settlement past the debt's bound: both settle series exist.
	if resp, err := check.Settle(ctx, &floodgatev1.SettleRequest{Key: "s", Actual: 10, IdempotencyKey: "obs-1", Source: &floodgatev1.SettleRequest_Policy{Policy: "obs_pol"}}); err != nil || resp.Unrecorded == 0 {
		t.Fatalf("Settle: %v %v, want some units unrecorded", resp, err)
	}
	envoy := rlsv3.NewRateLimitServiceClient(conn)
	desc := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := envoy.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "obs", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc}})
		if err != nil || resp.OverallCode != want {
			t.Fatalf("ShouldRateLimit %d: %v %v, want %v", i, resp, err, want)
		}
	}
	resp, err := http.Post("http://"+httpAddr+"/v1/check", "application/json", strings.NewReader(`{"key": "h", "policy": "obs_pol"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/check: %d %s", resp.StatusCode, body)
	}

	resp, err = http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	exp, err := parseExposition(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// TestObservabilityMetricsExported: every metric the dashboard and the
// alerting rules select is exported by a running floodgate, with every
// label they match, group by, join on, or show in a legend or an alert
// template. A renamed metric or label fails it, instead of emptying a
// panel or disarming an alert.
func TestObservabilityMetricsExported(t *testing.T) {
	exp := scrapeRunningFloodgate(t)
	if _, ok := exp["floodgate_decisions_total"]; !ok {
		t.Fatalf("the scrape has no floodgate_decisions_total after decisions; it has %d series names", len(exp))
	}

	t.Run("Dashboard", func(t *testing.T) {
		d := readDashboard(t)
		vars := d.variables()
		for _, v := range d.Templating.List {
			q, err := v.query()
			m := labelValuesQuery.FindStringSubmatch(q)
			if v.Type != "query" || err != nil || m == nil {
				continue // TestDashboardStructure reports these
			}
			expr, _ := expandGrafana(m[1], vars)
			have, errs := checkExpr(exp, expr)
			if !have[m[2]] {
				errs = append(errs, fmt.Errorf("label %q is not on %s %v", m[2], m[1], have))
			}
			for _, err := range errs {
				t.Errorf("variable %s: %v", v.Name, err)
			}
		}
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				expr, err := expandGrafana(tg.Expr, vars)
				if err != nil {
					continue // TestDashboardStructure reports it
				}
				have, errs := checkExpr(exp, expr)
				if missing := missingLabels(legendLabelRef, tg.LegendFormat, have); len(errs) == 0 && len(missing) > 0 {
					errs = append(errs, fmt.Errorf("legend %q shows %v, not on the result %v", tg.LegendFormat, missing, have))
				}
				for _, err := range errs {
					t.Errorf("panel %q query %s: %v", p.Title, tg.RefID, err)
				}
			}
		}
	})

	t.Run("Alerts", func(t *testing.T) {
		for _, g := range readAlerts(t).Groups {
			for _, r := range g.Rules {
				have, errs := checkExpr(exp, r.Expr)
				for _, name := range alertAnnotations {
					if missing := missingLabels(alertLabelRef, r.Annotations[name], have); len(errs) == 0 && len(missing) > 0 {
						errs = append(errs, fmt.Errorf("annotations.%s shows $labels %v, not on the result %v", name, missing, have))
					}
				}
				for _, err := range errs {
					t.Errorf("alert %s: %v", r.Alert, err)
				}
			}
		}
	})
}
