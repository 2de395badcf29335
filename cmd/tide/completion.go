package main

import (
	"fmt"
	"io"
	"strings"
)

// commands are tide's subcommands, for shell completion.
var commands = []string{"sim", "sweep", "bench", "trace", "policies", "serve", "submit", "jobs", "job", "cancel", "logs", "cluster",
	"hold", "release", "requeue", "usage", "tenant", "kube", "completion", "help"}

// jobCommands take job IDs as arguments.
var jobCommands = []string{"job", "cancel", "logs", "hold", "release", "requeue"}

const completionHelp = `Usage: tide completion bash|zsh|fish

Prints a completion script: subcommands, each command's flags (read from
'tide CMD -h') and, for job, cancel, logs, hold, release and requeue, job IDs (from
'tide jobs', with the server and token of your environment or config).

  bash:  source <(tide completion bash)        (or save it in /etc/bash_completion.d/tide)
  zsh:   source <(tide completion zsh)         (after compinit)
  fish:  tide completion fish > ~/.config/fish/completions/tide.fish
`

func cmdCompletion(args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprint(stdout, completionHelp)
		return nil
	}
	if len(args) != 1 {
		fmt.Fprint(stderr, completionHelp)
		return usageError{fmt.Errorf("want one shell: bash, zsh or fish")}
	}
	cmds, jobs := strings.Join(commands, " "), strings.Join(jobCommands, " ")
	switch args[0] {
	case "bash":
		fmt.Fprintf(stdout, bashCompletion, cmds, jobs)
	case "zsh":
		fmt.Fprintf(stdout, "autoload -U +X bashcompinit && bashcompinit\n"+bashCompletion, cmds, jobs)
	case "fish":
		fmt.Fprintf(stdout, fishCompletion, cmds, jobs)
	default:
		return usageError{fmt.Errorf("shell %q: want bash, zsh or fish", args[0])}
	}
	return nil
}

const bashCompletion = `# tide completion (bash; zsh through bashcompinit)
_tide() {
	local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]}
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "%s" -- "$cur"))
		return
	fi
	case "$cur" in
	-*)
		COMPREPLY=($(compgen -W "$(tide "$cmd" -h 2>&1 | sed -n 's/^  \(-[A-Za-z0-9-]*\).*/\1/p')" -- "$cur"))
		return ;;
	esac
	case " %s " in
	*" $cmd "*) COMPREPLY=($(compgen -W "$(tide jobs 2>/dev/null | awk 'NR > 1 {print $1}')" -- "$cur")) ;;
	*) COMPREPLY=($(compgen -f -- "$cur")) ;;
	esac
}
complete -F _tide tide
`

const fishCompletion = `# tide completion (fish)
set -l tide_commands %s
complete -c tide -f -n "not __fish_seen_subcommand_from $tide_commands" -a "$tide_commands"
function __tide_flags
	set -l cmd (commandline -opc)[2]
	tide $cmd -h 2>&1 | sed -n 's/^  \(-[A-Za-z0-9-]*\).*/\1/p'
end
function __tide_jobs
	tide jobs 2>/dev/null | awk 'NR > 1 {print $1}'
end
complete -c tide -n "__fish_seen_subcommand_from $tide_commands; and string match -q -- '-*' (commandline -ct)" -a "(__tide_flags)"
complete -c tide -f -n "__fish_seen_subcommand_from %s" -a "(__tide_jobs)"
`
