package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// envPrefix prefixes every flag's environment variable: --redis-url is
// FLOODGATE_REDIS_URL.
const envPrefix = "FLOODGATE_"

// envName is the environment variable that sets flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// newFlagSet returns a flag set for one subcommand whose usage (fs.Usage,
// written to fs.Output(), out unless changed) lists its flags in groups
// with their types, defaults and environment variables (usage.go).
// parseFlags silences the flag package's own messages while it parses:
// its errors become one-line messages, and --help a helpRequest that run
// prints on stdout.
func newFlagSet(name, synopsis string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { printUsage(fs.Output(), fs, name, synopsis) }
	return fs
}

// helpRequest is the error parseFlags returns for -h, --help or -help: it
// is flag.ErrHelp (errors.Is), and run prints its usage on stdout and
// exits 0.
type helpRequest struct{ fs *flag.FlagSet }

func (h *helpRequest) Error() string { return flag.ErrHelp.Error() }
func (h *helpRequest) Unwrap() error { return flag.ErrHelp }

// print writes the command's usage to w.
func (h *helpRequest) print(w io.Writer) {
	old := h.fs.Output()
	h.fs.SetOutput(w)
	h.fs.Usage()
	h.fs.SetOutput(old)
}

// parseCommand is parseFlags for the command name ("check"): -h and
// --help return a helpRequest; any other error is printed to stderr as
// "floodgate name: err" and returns exitCode(usage).
func parseCommand(fs *flag.FlagSet, args []string, getenv func(string) string, stderr io.Writer, name string, usage int) error {
	if err := parseFlags(fs, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return failed(stderr, name, usage, err)
	}
	return nil
}

// parseFlags parses args, then fills every flag not given on the command
// line from its environment variable. Command-line flags win. Its errors
// are one line each: an unknown flag with the nearest known one and a
// pointer to --help; a bad value with the flag or variable, the value and
// the form wanted.
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	failed, restore := describeValues(fs)
	err := fs.Parse(args)
	restore()
	fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &helpRequest{fs}
		}
		return explainParseError(fs, failed, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("$%s=%q: %s", envName(f.Name), v, wantedForm(f, e))
			}
		}
	})
	return err
}
