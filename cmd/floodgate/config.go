package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/internal/rules"
)

const configUsage = `Usage:
  floodgate config validate [--merge-domains] PATH
  floodgate config explain --config PATH [--merge-domains] --domain D --descriptor k=v[,k=v...] [--descriptor ...] [--bucket k=v[,k=v...]] [--json]
`

// runConfig runs `floodgate config validate|explain`.
func runConfig(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, configUsage)
		return exitCode(2)
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, configUsage)
		return nil
	case "validate":
		return runConfigValidate(args[1:], getenv, stdout, stderr)
	case "explain":
		return runConfigExplain(args[1:], getenv, stdout, stderr)
	}
	fmt.Fprintf(stderr, "floodgate config: unknown subcommand %q\n%s", args[0], configUsage)
	return exitCode(2)
}

// runConfigValidate runs `floodgate config validate PATH`.
func runConfigValidate(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("config validate PATH", "Checks a config file or a folder of them offline; exits 1 and prints file:line:column on error.", stdout)
	var load rules.Options
	registerRuleFlags(fs, &load)
	if err := parseCommand(fs, args, getenv, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "Usage: floodgate config validate PATH")
		return exitCode(2)
	}
	cfg, err := rules.Load(fs.Arg(0), load)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitCode(1)
	}
	fmt.Fprintf(stdout, "ok: %d file(s), %d domain(s), %d policies\n", len(cfg.Files()), len(cfg.Domains()), len(cfg.Policies()))
	return nil
}

// registerRuleFlags registers the flags that say how rules are loaded
// from files into o. Every command that reads rules (serve, config
// validate, config explain) registers them, so each reads a folder the
// same way.
func registerRuleFlags(fs *pflag.FlagSet, o *rules.Options) {
	fs.BoolVar(&o.MergeDomains, "merge-domains", false, "config files: several files may define one domain, each adding its top-level descriptors (one defined twice is refused), as the reference's MERGE_DOMAIN_CONFIG")
	fs.BoolVar(&o.AnyFile, "config-all-files", false, "a config folder: read every file in it and in its sub-folders, whatever its extension (names starting with '.' skipped), and serve an empty folder with no rules, as the reference reads its runtime folder (the reference environment sets it); off, only the folder's own *.yaml and *.yml files, at least one")
}
