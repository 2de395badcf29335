// Command tide is a GPU cluster scheduler for deep-learning jobs. This
// binary holds the simulator (tide sim, tide sweep, tide bench, tide
// policies), the single-machine executor behind an HTTP API (tide serve)
// and its client (submit, jobs, job, cancel, logs, cluster, tenant).
// The Kubernetes scheduler is its own binary, cmd/tide-kube, so that this
// one builds without the Kubernetes client; tide kube runs it when it is
// installed beside tide or on $PATH.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/tide-sched/tide/cmd/internal/cmdflags"
)

const usage = `tide schedules deep-learning jobs on GPU clusters.

Usage:
  tide sim [flags]      replay a trace under one or more policies and compare them
  tide sweep [flags]    compare policies across many traces (workloads, load levels)
  tide bench [flags]    measure the simulator's speed
  tide trace tile       build a datacenter-sized trace from a published one
  tide policies [NAME]  list the scheduling policies (NAME: one, with its knobs)
  tide serve [flags]    run jobs on this machine's GPUs behind the HTTP API
  tide submit [flags]   submit a job (a YAML/JSON file, or flags and a command)
  tide jobs             list jobs
  tide job ID           show a job and its attempts
  tide cancel ID...     cancel jobs
  tide logs [-f] ID     print (or follow) a job's output
  tide cluster          show the server's GPUs and queue
  tide hold|release ID  keep a waiting job from starting, or let it start
  tide requeue ID...    put ended or running jobs back in the queue (a new run)
  tide usage            GPU-hours per tenant or job over a period (table or CSV)
  tide tenant add NAME  create a tenant and print its token (admin; also set, list, rotate, revoke, delete)
  tide completion SHELL print the shell completion script (bash, zsh or fish)
  tide kube [flags]     run as a Kubernetes scheduler (pods, gangs, TideJobs);
                        runs the tide-kube binary (go run ./cmd/tide-kube)
  tide help [command]   show help

With no flags, 'tide sim' replays the Pollux workload-6 trace (160 jobs,
embedded) on 16 nodes x 4 T4 GPUs under FIFO, SRTF and Tiresias.
Run 'tide help sim' for every flag.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code.
// subcommands are the commands that have them, which name them in errors.
var subcommands = map[string][]string{"trace": {"tile"}, "tenant": {"add", "set", "list", "rotate", "revoke", "delete"}}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "sim":
		err = cmdSim(args[1:], stdout, stderr)
	case "bench":
		err = cmdBench(args[1:], stdout, stderr)
	case "trace":
		err = cmdTrace(args[1:], stdout, stderr)
	case "sweep":
		err = cmdSweep(args[1:], stdout, stderr)
	case "policies":
		err = cmdPolicies(args[1:], stdout)
	case "serve":
		err = cmdServe(args[1:], stdout, stderr)
	case "submit":
		err = cmdSubmit(args[1:], stdout, stderr)
	case "jobs":
		err = cmdJobs(args[1:], stdout, stderr)
	case "job":
		err = cmdJob(args[1:], stdout, stderr)
	case "cancel":
		err = cmdCancel(args[1:], stdout, stderr)
	case "logs":
		err = cmdLogs(args[1:], stdout, stderr)
	case "cluster":
		err = cmdCluster(args[1:], stdout, stderr)
	case "tenant":
		err = cmdTenant(args[1:], stdout, stderr)
	case "hold":
		err = cmdHold(true)(args[1:], stdout, stderr)
	case "release":
		err = cmdHold(false)(args[1:], stdout, stderr)
	case "requeue":
		err = cmdRequeue(args[1:], stdout, stderr)
	case "usage":
		err = cmdUsage(args[1:], stdout, stderr)
	case "completion":
		err = cmdCompletion(args[1:], stdout, stderr)
	case "kube":
		err = cmdKube(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[1] != "help" && !isHelp(args[1]) { // tide help help: the usage, not tide help -h forever
			return run([]string{args[1], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "tide: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		name := args[0]
		if len(args) > 1 && slices.Contains(subcommands[name], args[1]) {
			name += " " + args[1] // "tide tenant rotate: ..."
		}
		fmt.Fprintf(stderr, "tide %s: %v\n", name, err)
		var ce exitCodeError
		if errors.As(err, &ce) {
			return ce.code
		}
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// parseFlags is cmdflags.Parse, a mistake being a usageError (exit 2).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := cmdflags.Parse(fs, args, "tide help "+fs.Name())
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return usageError{err}
	}
	return err
}

// usageError marks mistakes on the command line (exit code 2).
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }
