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

package version

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// ParseFlags parses a daemon's command line with --version added: it
// prints "<name> <version line>" to w for --version, and the usage for
// --help, and then says the daemon is done (it exits 0). A command line
// that does not parse is a UsageError.
func ParseFlags(fs *pflag.FlagSet, args []string, name string, w io.Writer) (done bool, err error) {
	var show bool
	fs.BoolVar(&show, "version", false, "Print the version (release, git revision, Go version, platform) and exit.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return true, nil
		}
		return true, UsageError{Err: err}
	}
	if show {
		fmt.Fprintln(w, name, Get())
		return true, nil
	}
	return false, nil
}

// UsageError is a command line that does not parse; daemons exit 2 for it,
// as Go's flag package does.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// ExitCode is a daemon's exit status for the error its run ended with: 0
// for none, 2 for a UsageError, 1 otherwise.
func ExitCode(err error) int {
	var u UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	default:
		return 1
	}
}
