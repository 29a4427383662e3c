package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// flagGroup is one heading of a command's --help and the flags under it:
// those named in names, or starting with one of prefixes.
type flagGroup struct {
	title    string
	names    []string
	prefixes []string
}

// flagGroups orders --help: a flag goes under the first group that claims
// it, and flags no group claims under "Other".
var flagGroups = []flagGroup{
	{title: "Listen", names: []string{"grpc-addr", "http-addr", "http-api", "http-cors-origins", "http-allowed-hosts", "http-deny-status", "unary-timeout", "drain-timeout"}, prefixes: []string{"max-concurrent-streams", "max-recv-msg-bytes", "max-header-list-bytes", "max-streams", "max-connections"}},
	{title: "Server to ask", names: []string{"addr", "timeout"}},
	{title: "Auth and TLS", names: []string{"auth-token-file", "token"}, prefixes: []string{"tls", "redis-tls-", "config-xds-tls"}},
	{title: "Store", names: []string{"failure-mode", "settle-window", "deny-cache-size", "replicas", "replicas-heartbeat"}, prefixes: []string{"redis-", "memory-", "local-"}},
	{title: "Rules", names: []string{"config", "config-all-files", "merge-domains", "domain", "descriptor", "bucket"}, prefixes: []string{"config-xds-"}},
	{title: "Limits and answers", names: []string{"max-key-bytes", "shadow-mode", "quota-mode", "count-denied-hits", "share-override-counters", "envoy-refunds", "key", "limit", "burst", "algorithm", "policy", "time-zone", "cost", "hits"}, prefixes: []string{"response-", "quota-"}},
	{title: "Observability", names: []string{"detailed-metric-series", "trace-values", "pprof", "gc-percent"}, prefixes: []string{"log-", "limited-"}},
}

// groupOf is the title of the group flag name belongs to.
func groupOf(name string) string {
	for _, g := range flagGroups {
		if slices.Contains(g.names, name) {
			return g.title
		}
	}
	for _, g := range flagGroups {
		if slices.ContainsFunc(g.prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			return g.title
		}
	}
	return "Other"
}

// printUsage writes a command's help: its synopsis, then its flags with
// their types, defaults and environment variables, in groups when the
// command has flags of more than one group and at least eight in all.
func printUsage(w io.Writer, fs *pflag.FlagSet, name, synopsis string) {
	fmt.Fprintf(w, "Usage: floodgate %s\n\n%s\n", name, synopsis)
	var all []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) { all = append(all, f) }) // in name order
	if len(all) == 0 {
		return
	}
	byGroup := map[string][]*pflag.Flag{}
	for _, f := range all {
		byGroup[groupOf(f.Name)] = append(byGroup[groupOf(f.Name)], f)
	}
	fmt.Fprintf(w, "\nFlags (each also settable by its environment variable, shown in [ ]; a flag on the command line wins):\n")
	if len(byGroup) < 2 || len(all) < 8 {
		for _, f := range all {
			printFlag(w, f)
		}
		return
	}
	for _, g := range append(flagGroups, flagGroup{title: "Other"}) {
		if len(byGroup[g.title]) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, f := range byGroup[g.title] {
			printFlag(w, f)
		}
	}
}

// printFlag writes one flag: --name TYPE [$ENV] (default D), then its usage.
func printFlag(w io.Writer, f *pflag.Flag) {
	typ, usage := pflag.UnquoteUsage(f)
	if typ == "stringArray" { // repeatable; its usage says so
		typ = "string"
	}
	head := "  --" + f.Name
	if typ != "" {
		head += " " + typ
	}
	def := ""
	if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" && f.DefValue != "[]" {
		def = fmt.Sprintf(" (default %s)", f.DefValue)
	}
	fmt.Fprintf(w, "%s  [$%s]\n        %s%s\n", head, envName(f.Name), usage, def)
}
