package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCompletionShells loads each completion script into the real shell
// (bash, zsh, fish; a shell not installed is skipped, saying so) and asks
// it to complete: a subcommand from its prefix, a flag of a subcommand
// (read from 'tide CMD -h'), and a job ID (from 'tide jobs', against a
// real tide serve). Bash and zsh run the completion function as the shell
// would (zsh through bashcompinit, with its 0-based arrays); fish answers
// through 'complete -C', its own completion engine.
func TestCompletionShells(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tide serve")
	}
	bin, _ := binaries(t)
	dir := filepath.Join(t.TempDir(), "data")
	s := serve(t, bin, dir)
	admin := strings.TrimSpace(readFile(filepath.Join(dir, "admin.token")))
	id := strings.Fields(cli(t, s, admin, "submit", "--hold", "--cmd", "true"))[0]

	// ask is a shell program that completes the words of line (the last
	// one being completed) and prints one candidate a line.
	tests := []struct {
		shell string
		ask   func(line []string) string
	}{
		{"bash", func(line []string) string {
			return `source "$SCRIPT" && complete -p tide >/dev/null && COMP_WORDS=(` + shellWords(line) + `) && COMP_CWORD=` +
				strconv.Itoa(len(line)-1) + ` && _tide && printf '%s\n' "${COMPREPLY[@]}"`
		}},
		{"zsh", func(line []string) string {
			return `autoload -U compinit && compinit -u -d "$TMPDIR/zcompdump" && source "$SCRIPT" && [[ -n ${_comps[tide]} ]] && ` +
				`setopt ksharrays && COMP_WORDS=(` + shellWords(line) + `) && COMP_CWORD=` + strconv.Itoa(len(line)-1) +
				` && _tide && print -l -- "${COMPREPLY[@]}"`
		}},
		{"fish", func(line []string) string {
			return `source $SCRIPT; and complete -C ` + shellWords([]string{strings.Join(line, " ")})
		}},
	}
	cases := []struct {
		line []string
		want string
	}{
		{[]string{"tide", "req"}, "requeue"},
		{[]string{"tide", "requeue", "-ho"}, "-hold"},
		{[]string{"tide", "requeue", ""}, id},
	}
	for _, tc := range tests {
		t.Run(tc.shell, func(t *testing.T) {
			sh, err := exec.LookPath(tc.shell)
			if err != nil {
				t.Skipf("%s is not installed (apt-get install %s)", tc.shell, tc.shell)
			}
			code, script, errs := tide(t, "completion", tc.shell)
			if code != 0 {
				t.Fatalf("tide completion %s: exit %d %s", tc.shell, code, errs)
			}
			tmp := t.TempDir()
			path := filepath.Join(tmp, "tide."+tc.shell)
			if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				cmd := exec.Command(sh, "-c", tc.ask(c.line))
				cmd.Env = append(os.Environ(), "SCRIPT="+path, "TMPDIR="+tmp, "HOME="+tmp, "XDG_CONFIG_HOME="+tmp,
					"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
					"TIDE_SERVER="+s.url, "TIDE_TOKEN="+admin)
				out, err := cmd.CombinedOutput()
				var got []string
				for _, l := range strings.Split(string(out), "\n") {
					f, _, _ := strings.Cut(l, "\t") // fish: candidate TAB description
					got = append(got, strings.TrimSpace(f))
				}
				if err != nil || !slices.Contains(got, c.want) {
					t.Errorf("%s completing %q: %v; want %q among:\n%s", tc.shell, strings.Join(c.line, " "), err, c.want, out)
				}
			}
		})
	}
}

// shellWords quotes words for bash, zsh and fish alike (single quotes; the
// words hold none).
func shellWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + w + "'"
	}
	return strings.Join(q, " ")
}
