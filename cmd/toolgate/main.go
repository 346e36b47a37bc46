// Command toolgate is the one binary: the API server, the schema migration,
// and the bootstrap of organisations, users and tokens.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolgate/toolgate/tools/code"
	"github.com/toolgate/toolgate/tools/document"
)

const usage = `toolgate: the backend of an AI assistant portal.

Usage:
  toolgate serve     [flags]   serve the API (flags: toolgate serve -h)
  toolgate migrate   [flags]   bring the database schema up to date and exit
  toolgate bootstrap --org NAME --user NAME --department NAME
                               create (or reuse) an organisation and user and print a new API token
  toolgate schema              print the GraphQL schema (SDL), for code generators
`

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "toolgate:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("name a command")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr, log)
	case "migrate":
		return migrate(ctx, args[1:], stdout, stderr)
	case "bootstrap":
		return bootstrap(ctx, args[1:], stdout, stderr)
	case "schema":
		return schema(args[1:], stdout, stderr)
	case "sandbox":
		// Hidden: the child run_code starts, one job over stdin and stdout.
		return code.ServeChild(os.Stdin, stdout)
	case "extract":
		// Hidden: the child that reads one uploaded file's text, bounded.
		return document.ServeChild(os.Stdin, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// env returns the environment variable, or def when it is unset.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}
