package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// envPrefix prefixes every flag's environment variable: --redis-url is
// FLOODGATE_REDIS_URL.
const envPrefix = "FLOODGATE_"

// envName is the environment variable that sets flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// newFlagSet returns a flag set for one subcommand whose usage lists every
// flag with its environment variable.
func newFlagSet(name, synopsis string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: floodgate %s\n\n%s\n\nFlags (each also settable by its environment variable):\n", name, synopsis)
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		sort.Strings(names)
		for _, n := range names {
			f := fs.Lookup(n)
			def := ""
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
				def = fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(out, "  --%s  [$%s]\n        %s%s\n", n, envName(n), f.Usage, def)
		}
	}
	return fs
}

// parseCommand is parseFlags for the command name ("check"): -h and
// --help return flag.ErrHelp; any other error is printed to stderr as
// "floodgate name: err" and returns exitCode(usage).
func parseCommand(fs *flag.FlagSet, args []string, getenv func(string) string, stderr io.Writer, name string, usage int) error {
	if err := parseFlags(fs, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		fmt.Fprintf(stderr, "floodgate %s: %v\n", name, err)
		return exitCode(usage)
	}
	return nil
}

// parseFlags parses args, then fills every flag not given on the command
// line from its environment variable. Command-line flags win.
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("$%s: %w", envName(f.Name), e)
			}
		}
	})
	return err
}
