package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// envPrefix prefixes every flag's environment variable: --redis-url is
// FLOODGATE_REDIS_URL.
const envPrefix = "FLOODGATE_"

// envName is the environment variable that sets flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// newFlagSet returns a flag set for one subcommand whose usage lists its
// flags in groups with their types, defaults and environment variables
// (usage.go). On -h, --help or -help, pflag writes it to stdout (the flag
// set's output, where pflag writes nothing else) and Parse returns
// pflag.ErrHelp, which run takes for success; parseFlags words the other
// errors in one line each.
func newFlagSet(name, synopsis string, stdout io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() { printUsage(stdout, fs, name, synopsis) }
	return fs
}

// parseCommand is parseFlags for a command: -h and --help return
// pflag.ErrHelp; any other error, or an argument given to a command that
// takes only flags ("serve [flags]"), is printed to stderr as "floodgate
// check: err" (commandName) and ends the command with status 2.
func parseCommand(fs *pflag.FlagSet, args []string, getenv func(string) string, stderr io.Writer) error {
	err := parseFlags(fs, args, getenv)
	if err == nil && fs.NArg() > 0 && strings.HasSuffix(fs.Name(), " [flags]") {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
		if _, serr := os.Stat(fs.Arg(0)); serr == nil && commandName(fs) == "serve" {
			err = fmt.Errorf("unexpected argument %q (rules go after --config: floodgate serve --config %s)", fs.Arg(0), fs.Arg(0))
		}
	}
	if err == nil || errors.Is(err, pflag.ErrHelp) {
		return err
	}
	return failed(stderr, commandName(fs), 2, err)
}

// parseFlags parses args, then fills every flag not given on the command
// line from its environment variable. Command-line flags win; a single
// dash works as two (-config is --config), as Go's flag package allows.
// Its errors are one line each: an unknown flag with the nearest known one
// and a pointer to --help; a bad value with the flag or variable, the
// value and the form wanted.
func parseFlags(fs *pflag.FlagSet, args []string, getenv func(string) string) error {
	err := fs.Parse(doubleDashes(fs, args))
	if errors.Is(err, pflag.ErrHelp) {
		return err
	}
	if err != nil {
		return explainParseError(fs, err)
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("$%s=%q: %s", envName(f.Name), v, wantedForm(f, v, e))
			}
		}
	})
	return err
}

// doubleDashes rewrites each flag written with one dash (-config) as with
// two, leaving alone -h, the values of flags that take one, and everything
// after "--".
func doubleDashes(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 1 && a[0] == '-' && a[1] != '-' && a != "-h" {
			a = "-" + a
		}
		out = append(out, a)
		name, hasValue := strings.CutPrefix(a, "--")
		if !hasValue || strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil && f.NoOptDefVal == "" && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}
