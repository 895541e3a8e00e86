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

package main

import (
	"errors"
	"fmt"
)

// Exit statuses. Every subcommand's help says which of them it uses.
const (
	exitOK = 0
	// exitNegative: the command's answer is no (check's findings,
	// inventory's differences, examples simulate cannot run, manifests
	// migrate cannot fully rewrite, failed gpu-check steps).
	exitNegative = 1
	// exitUsage: a bad command line (an unknown flag or command, a bad
	// flag value) or unusable input.
	exitUsage = 2
	// exitFailure: the command could not do its work (no NVML library, no
	// GPU, no cluster, a plugin that did not start).
	exitFailure = 3
)

// errNoNVML: the build without cgo (nvml_nocgo.go) has no NVML, real or
// fake (exit 3).
var errNoNVML = errors.New("this gpudra is built without cgo (the build for laptops) and has no NVML, real or fake; use the Linux build (make build)")

// exitError carries an exit status past cobra. With err nil the command
// has reported already; otherwise main prints err.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e exitError) Unwrap() error { return e.err }

// usageErrorf is a bad command line or unusable input (exit 2).
func usageErrorf(format string, args ...any) error {
	return exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// exitCodeOf is the exit status for the error a command returned: its
// exitError's, or exitFailure for any other error.
func exitCodeOf(err error) int {
	var exit exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &exit):
		return exit.code
	default:
		return exitFailure
	}
}
