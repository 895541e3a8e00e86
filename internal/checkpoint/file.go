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

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	kjson "sigs.k8s.io/json"
)

// fileFormat is what is on disk: the checkpoint body and a checksum over it.
//
// The checksum covers the compacted JSON of the body as it is in the file,
// not a re-encoding of the decoded struct, so that fields this gpudra does
// not know (written by a newer one) are covered too and do not make an
// intact file look corrupt. Whitespace is outside the checksum, which lets
// the file be indented for the admin who inspects it.
type fileFormat struct {
	Checksum   string          `json:"checksum"`
	Checkpoint json.RawMessage `json:"checkpoint"`
}

const checksumPrefix = "sha256:"

// encode returns the file content for cp, written as the current Version.
func encode(cp *Checkpoint) ([]byte, error) {
	body := *cp
	body.Version = Version
	if body.Claims == nil {
		body.Claims = map[string]Claim{}
	}
	// json.Marshal output is already compact (map keys sorted), which is
	// exactly what decode hashes after compacting the file's body.
	raw, err := json.Marshal(&body)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	data, err := json.MarshalIndent(fileFormat{Checksum: checksum(raw), Checkpoint: raw}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	return append(data, '\n'), nil
}

// decode verifies data and returns the checkpoint in it. Errors say what is
// wrong; the caller adds the path.
//
// Decoding is case-sensitive (encoding/json matches "Checksum" to
// "checksum", which would let a flipped bit through), and the envelope is
// strict: its two fields are fixed for all versions, so anything else in it
// is damage.
func decode(data []byte) (*Checkpoint, error) {
	var f fileFormat
	strictErrs, err := kjson.UnmarshalStrict(data, &f)
	if err == nil && len(strictErrs) > 0 {
		err = errors.Join(strictErrs...)
	}
	if err != nil {
		return nil, corruptf("does not parse as a checkpoint file: %w", err)
	}
	if f.Checksum == "" || len(f.Checkpoint) == 0 {
		return nil, corruptf(`"checksum" or "checkpoint" is missing`)
	}
	body, err := compact(f.Checkpoint)
	if err != nil {
		return nil, corruptf("%w", err)
	}
	if got := checksum(body); got != f.Checksum {
		return nil, corruptf("checksum mismatch: the file records %s but its content hashes to %s "+
			"(a torn write or an edit)", f.Checksum, got)
	}

	// Unknown fields are fine here: a newer gpudra may add some.
	var cp Checkpoint
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &cp); err != nil {
		// The checksum matched, so the file was written this way: a
		// gpudra that changed a field's type must also have changed the
		// version, but this one could not even read that far.
		return nil, corruptf("checkpoint body does not parse: %w", err)
	}
	if cp.Version != Version {
		return nil, fmt.Errorf("%w: the file has version %q but this gpudra reads only %q "+
			"(was it written by a newer gpudra before a downgrade?)", ErrUnsupportedVersion, cp.Version, Version)
	}
	if cp.Claims == nil {
		cp.Claims = map[string]Claim{}
	}
	return &cp, nil
}

// compact strips insignificant whitespace: the form the checksum covers, and
// the form nested raw JSON (Device.Config) is handed back in, whatever the
// indentation of the file.
func compact(body []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, body); err != nil {
		return nil, fmt.Errorf("checkpoint body is not valid JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// checksum is the SHA-256 of a compacted JSON body.
func checksum(compactBody []byte) string {
	sum := sha256.Sum256(compactBody)
	return checksumPrefix + hex.EncodeToString(sum[:])
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}
