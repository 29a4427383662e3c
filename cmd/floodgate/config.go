package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/floodgate/floodgate/internal/rules"
)

// runConfig runs `floodgate config validate PATH`.
func runConfig(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "validate" {
		fmt.Fprintln(stderr, "Usage: floodgate config validate PATH")
		return exitCode(2)
	}
	fs := newFlagSet("config validate PATH", "Checks a config file or a folder of them offline; exits 1 and prints file:line:column on error.", stderr)
	if err := parseFlags(fs, args[1:], getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return exitCode(2)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "Usage: floodgate config validate PATH")
		return exitCode(2)
	}
	cfg, err := rules.Load(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitCode(1)
	}
	fmt.Fprintf(stdout, "ok: %d file(s), %d domain(s), %d policies\n", len(cfg.Files()), len(cfg.Domains()), len(cfg.Policies()))
	return nil
}
