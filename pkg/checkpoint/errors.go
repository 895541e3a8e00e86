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
