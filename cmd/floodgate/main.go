// Command floodgate is a gRPC rate-limit decision service. Its commands
// (serve, check, settle, config, bench, simulate, top) are listed in usage
// and dispatched by run. Every flag can also be set with an environment
// variable: --grpc-addr is FLOODGATE_GRPC_ADDR. `floodgate COMMAND --help`
// lists them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, invocationArgs(os.Args), os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if ec, ok := errors.AsType[exitCode](err); ok {
			os.Exit(int(ec))
		}
		fmt.Fprintln(os.Stderr, "floodgate:", err)
		os.Exit(1)
	}
}

// exitCode ends the program with a status and no further message (the
// command has already said what was wrong).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// failed is how a command reports that it failed: err on stderr as the
// command's ("floodgate check: ..."), and code as the exit status.
func failed(stderr io.Writer, command string, code int, err error) error {
	fmt.Fprintf(stderr, "floodgate %s: %v\n", command, err)
	return exitCode(code)
}

const usage = `floodgate: a gRPC rate-limit decision service

Usage:
  floodgate serve [flags]              run the server
  floodgate check [flags]              ask a running floodgate about a key, or Envoy's API about descriptors
  floodgate settle [flags]             charge usage known afterwards (debt or refund, once per --idempotency-key)
  floodgate config validate PATH       check a config file or folder (exit 1 on error)
  floodgate config explain [flags]     why a request is limited: the rule each descriptor matches
  floodgate bench [flags]              load-test a server (closed loop; decisions/s, latency)
  floodgate simulate [flags]           draw what an algorithm makes of a traffic pattern (no server)
  floodgate top [flags]                who is being limited: the heaviest denied keys of each rule (--watch)
  floodgate version                    print the version

Run "floodgate COMMAND --help" (or "floodgate help COMMAND") for a command's flags
and environment variables. Exit status: 0 done, 1 a runtime failure, 2 a usage
error (an unknown flag, a bad value); check and simulate document theirs.
`

// command runs one command with its arguments.
type command func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// commands are the commands run dispatches, besides version and help.
var commands = map[string]command{
	"serve": runServe, "check": runCheck, "settle": runSettle, "bench": runBench, "top": runTop,
	"simulate": runSimulate, "config": runConfig,
}

// run is the whole program: it parses args and runs one command until ctx
// ends. main only wires the process to it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitCode(2)
	}
	var err error
	switch cmd, ok := commands[args[0]]; {
	case ok:
		err = cmd(ctx, args[1:], getenv, stdout, stderr)
	case slices.Contains([]string{"version", "--version", "-version"}, args[0]):
		if len(args) > 1 && slices.Contains([]string{"-h", "-help", "--help"}, args[1]) {
			fmt.Fprint(stdout, "Usage: floodgate version\n\nPrints the version of this floodgate binary (git describe at build time, or dev).\n")
			return nil
		}
		fmt.Fprintln(stdout, "floodgate", version)
	case args[0] == "help" && len(args) > 1:
		return run(ctx, append(slices.Clone(args[1:]), "--help"), getenv, stdout, stderr) // floodgate help serve is floodgate serve --help
	case slices.Contains([]string{"help", "-h", "-help", "--help"}, args[0]):
		fmt.Fprint(stdout, usage)
	default:
		if near := nearest(args[0], append(slices.Collect(maps.Keys(commands)), "version", "help")); near != "" {
			fmt.Fprintf(stderr, "floodgate: unknown command %q; did you mean %q? (floodgate help lists the commands)\n", args[0], near)
		} else {
			fmt.Fprintf(stderr, "floodgate: unknown command %q\n\n%s", args[0], usage)
		}
		return exitCode(2)
	}
	if errors.Is(err, pflag.ErrHelp) { // the command's usage is on stdout
		return nil
	}
	return err
}
