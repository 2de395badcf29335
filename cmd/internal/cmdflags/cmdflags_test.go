package cmdflags

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"
)

// level is a flag of tide's own type, whose Set says what it wants.
type level int

func (l *level) String() string { return fmt.Sprint(int(*l)) }
func (l *level) Set(s string) error {
	if s != "low" {
		return errors.New(`want "low"`)
	}
	*l = 1
	return nil
}

// TestParse: a mistake is one error naming the flag with two dashes, the
// value given, what the flag wants and where the help is; the values
// parse as the flag package parses them, and each flag keeps its own
// Value after the parse.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the whole error, "" for none
	}{
		{[]string{"--n", "3", "--x", "0.5", "--d", "90s", "--v", "--u", "7", "--l", "low"}, ""},
		{[]string{"--v=false"}, ""},
		{[]string{"--bogus"}, "unknown flag --bogus (run 'tide help t' for every flag)"},
		{[]string{"-n", "1.5"}, `--n "1.5": want a whole number (run 'tide help t' for every flag)`},
		{[]string{"--n", "99999999999999999999"}, `--n "99999999999999999999": want a whole number (value out of range) (run 'tide help t' for every flag)`},
		{[]string{"--u", "-1"}, `--u "-1": want a whole number, 0 or more (run 'tide help t' for every flag)`},
		{[]string{"--x", "a\"b: c"}, `--x "a\"b: c": want a number (run 'tide help t' for every flag)`},
		{[]string{"--d", "forever"}, `--d "forever": want a duration such as 90s, 10m or 1h30m (run 'tide help t' for every flag)`},
		{[]string{"--v=maybe"}, `--v "maybe": want true or false (run 'tide help t' for every flag)`},
		{[]string{"--l", "high"}, `--l "high": want "low" (run 'tide help t' for every flag)`},
		{[]string{"--n"}, "--n needs a value (run 'tide help t' for every flag)"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		n := fs.Int("n", 0, "")
		x := fs.Float64("x", 0, "")
		d := fs.Duration("d", 0, "")
		v := fs.Bool("v", false, "")
		u := fs.Uint("u", 0, "")
		var l level
		fs.Var(&l, "l", "")
		err := Parse(fs, tc.args, "tide help t")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%q: error %v, want %s", tc.args, err, tc.want)
		}
		if tc.want == "" && tc.args[0] == "--n" && (*n != 3 || *x != 0.5 || *d != 90*time.Second || !*v || *u != 7 || l != 1) {
			t.Errorf("%q: parsed n=%d x=%g d=%v v=%v u=%d l=%d", tc.args, *n, *x, *d, *v, *u, l)
		}
		if got := fs.Lookup("l").Value; got != flag.Value(&l) {
			t.Errorf("%q: --l's Value is %T after the parse, want its own", tc.args, got)
		}
		if _, ok := fs.Lookup("n").Value.(want); ok || strings.Contains(fmt.Sprintf("%T", fs.Lookup("v").Value), "want") {
			t.Errorf("%q: a wrapped Value was left in the flag set", tc.args)
		}
	}
}
