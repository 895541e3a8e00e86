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

package checkpoint

import "errors"

var (
	// ErrCorrupt is wrapped by Load's error when the checkpoint file
	// cannot be trusted: it does not parse, or its checksum does not match
	// its content (a torn write, a disk error, a hand edit).
	ErrCorrupt = errors.New("checkpoint is corrupt")
	// ErrUnsupportedVersion is wrapped by Load's error when the file is
	// intact but in a format this gpudra does not know, typically one
	// written by a newer gpudra before a downgrade.
	ErrUnsupportedVersion = errors.New("checkpoint version is not supported")
)

// leftUntouched ends every error about a file that Load refused, so that the
// admin reading the plugin's log knows the record still exists and what to
// do with it.
const leftUntouched = "the file was left untouched: inspect it, restore it, or move it aside to start " +
	"with no record of prepared claims (gpudra then no longer knows which MIG instances and " +
	"sharing daemons it created for them)"
