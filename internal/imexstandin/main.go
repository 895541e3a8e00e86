/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package imexstandin

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Subcommand is the first argument that makes a binary the stand-in
// daemon (nvidia-imex -c <imexd.cfg>); CtlSubcommand makes it the
// stand-in's nvidia-imex-ctl. As with the MPS stand-in, the package's
// init runs them before main or a test binary's flag parsing, so that a
// binary that links the package cannot forget to.
const (
	Subcommand    = "fake-nvidia-imex"
	CtlSubcommand = "fake-nvidia-imex-ctl"
)

// ExitConfig is the exit status when the config or the node list cannot
// be read: 255, as nvidia-imex-ctl exits when it cannot read its node
// config.
const ExitConfig = 255

// DefaultConfigFile is where nvidia-imex reads its config by default.
const DefaultConfigFile = "/etc/nvidia-imex/config.cfg"

func init() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case Subcommand:
			os.Exit(Main(os.Args[2:], os.Stderr))
		case CtlSubcommand:
			os.Exit(Ctl(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
}

// Main runs the stand-in daemon as nvidia-imex -c <file> runs, in the
// foreground, until SIGTERM or SIGINT, and returns the exit status.
func Main(args []string, errOut io.Writer) int {
	fs := flag.NewFlagSet(Subcommand, flag.ContinueOnError)
	fs.SetOutput(errOut)
	cfgFile := fs.String("c", DefaultConfigFile, "the IMEX config file (imexd.cfg)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := LoadConfig(*cfgFile)
	if err != nil {
		fmt.Fprintln(errOut, "fake nvidia-imex:", err)
		return ExitConfig
	}
	nodes, err := LoadNodes(cfg.NodeConfigFile)
	if err != nil {
		fmt.Fprintln(errOut, "fake nvidia-imex:", err)
		return ExitConfig
	}
	d, err := New(cfg, nodes, Options{})
	if err != nil {
		fmt.Fprintln(errOut, "fake nvidia-imex:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := d.Run(ctx); err != nil {
		fmt.Fprintln(errOut, "fake nvidia-imex:", err)
		return 1
	}
	return 0
}

// Ctl is the stand-in's nvidia-imex-ctl: -q prints the daemon's answer
// (READY), -N -j its node status as JSON; --u=<socket> names the control
// socket, else it is IMEX_CMD_UNIX_DOMAIN_PATH of -c's config. It returns
// 0 when the daemon answered (and, for -q, answered READY).
func Ctl(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet(CtlSubcommand, flag.ContinueOnError)
	fs.SetOutput(errOut)
	q := fs.Bool("q", false, "query the local daemon's readiness once and return")
	n := fs.Bool("N", false, "print the nodes' connectivity")
	j := fs.Bool("j", false, "with -N: as JSON (the only form the stand-in prints)")
	socket := fs.String("u", "", "the daemon's control socket (IMEX_CMD_UNIX_DOMAIN_PATH)")
	cfgFile := fs.String("c", DefaultConfigFile, "the IMEX config file, read for the control socket when -u is not given")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *q == *n || (*n && !*j) {
		fmt.Fprintln(errOut, "fake nvidia-imex-ctl: give -q, or -N -j")
		return 2
	}
	if *socket == "" {
		cfg, err := LoadConfig(*cfgFile)
		if err != nil {
			fmt.Fprintln(errOut, "fake nvidia-imex-ctl:", err)
			return ExitConfig
		}
		if cfg.CmdUnixDomainPath == "" {
			fmt.Fprintf(errOut, "fake nvidia-imex-ctl: %s sets no IMEX_CMD_UNIX_DOMAIN_PATH: set it, or give --u=<socket>\n", *cfgFile)
			return ExitConfig
		}
		*socket = cfg.CmdUnixDomainPath
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if *q {
		answer, err := ask(ctx, *socket, QueryReady)
		if err != nil {
			fmt.Fprintln(errOut, "fake nvidia-imex-ctl:", err)
			return 1
		}
		fmt.Fprint(out, answer)
		if answer != ReadyAnswer {
			return 1
		}
		return 0
	}
	s, err := QueryNodeStatus(ctx, *socket)
	if err != nil {
		fmt.Fprintln(errOut, "fake nvidia-imex-ctl:", err)
		return 1
	}
	if err := json.NewEncoder(out).Encode(s); err != nil {
		return 1
	}
	return 0
}
