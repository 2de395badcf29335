// Package cmdflags parses the flags of tide's commands.
package cmdflags

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"time"
)

// Parse parses a command's flags. A mistake (a flag that does not
// exist, a value that does not parse) is returned as an error that says
// so, what the flag wants, and where the help is (helpCmd, such as "tide
// help sim"), without the help itself: it is long, and printed whole it
// hid the one line that mattered. -h prints the help (fs.Usage) and
// returns flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string, helpCmd string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	// The flag package says only "parse error" of a value that is not a
	// number, a duration or a boolean: each standard flag's Set is
	// wrapped, for the parse only, to say what it wants instead.
	var restore []func()
	fs.VisitAll(func(f *flag.Flag) {
		if w := wantOf(f.Value); w != "" {
			v := f.Value
			restore = append(restore, func() { f.Value = v })
			if b, ok := v.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				f.Value = boolWant{want{v, w}}
			} else {
				f.Value = want{v, w}
			}
		}
	})
	err := fs.Parse(args)
	for _, r := range restore {
		r()
	}
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	case err != nil:
		return fmt.Errorf("%s (run '%s' for every flag)", tideStyle(err.Error()), helpCmd)
	}
	return nil
}

// The flag package's messages, which name a flag with one dash.
var (
	undefined = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	badValue  = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-+([^:]*): (.*)$`)
	noValue   = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
)

// tideStyle rewrites the flag package's message msg as tide's other
// errors read: the flag first, with the two dashes its help and docs
// use ("--round \"soon\": want a number"). A message of another shape
// is returned as it is.
func tideStyle(msg string) string {
	if m := undefined.FindStringSubmatch(msg); m != nil {
		return "unknown flag --" + m[1]
	}
	if m := badValue.FindStringSubmatch(msg); m != nil {
		return "--" + m[2] + " " + m[1] + ": " + m[3]
	}
	if m := noValue.FindStringSubmatch(msg); m != nil {
		return "--" + m[1] + " needs a value"
	}
	return msg
}

// wantOf says what a standard flag's value must be ("" for other flags,
// whose own Set says it).
func wantOf(v flag.Value) string {
	g, ok := v.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case bool:
		return "want true or false"
	case int, int64:
		return "want a whole number"
	case uint, uint64:
		return "want a whole number, 0 or more"
	case float64:
		return "want a number"
	case time.Duration:
		return "want a duration such as 90s, 10m or 1h30m"
	}
	return ""
}

// want is a standard flag's value whose parse error says what it wants.
type want struct {
	flag.Value
	want string
}

func (w want) Set(s string) error {
	err := w.Value.Set(s)
	switch {
	case err == nil:
		return nil
	case err.Error() == "parse error": // the flag package's, which says no more
		return errors.New(w.want)
	}
	return fmt.Errorf("%s (%v)", w.want, err)
}

func (w want) Get() any { return w.Value.(flag.Getter).Get() }

// boolWant is want for a boolean flag, which may stand alone (-v).
type boolWant struct{ want }

func (boolWant) IsBoolFlag() bool { return true }
