// Package cmdflags parses the flags of tide's commands.
package cmdflags

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Parse parses a command's flags. A mistake (a flag that does not
// exist, a value that does not parse) is returned as an error that says
// so and where the help is (helpCmd, such as "tide help sim"), without the
// help itself: it is long, and printed whole it hid the one line that
// mattered. -h prints the help (fs.Usage) and returns flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string, helpCmd string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	case err != nil:
		return fmt.Errorf("%w (run '%s' for every flag)", err, helpCmd)
	}
	return nil
}
