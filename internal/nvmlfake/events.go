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

package nvmlfake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// The XID event log is a JSON-lines file in the state directory, so that
// another process (a test, `gpudra`, an operator with a shell) can inject
// an error that a running Server's EventSet.Wait then delivers, the way
// the kernel driver reports a real XID to every NVML client.

// xidRecord is one event in the log: an injected XID, or a change of a
// GPU's recovery action.
type xidRecord struct {
	// UUID is a GPU-… or MIG-… UUID (a GPU-… one for a recovery action).
	UUID string `json:"uuid"`
	XID  uint64 `json:"xid,omitempty"`
	// Event is "" for an XID and recoveryActionEvent when the driver's
	// recovery action for the GPU changed (recovery.go). An event set
	// delivers the latter only to a GPU registered for
	// nvml.EventTypeGpuRecoveryAction, which only drivers from R565 on
	// offer (eventset.go).
	Event string `json:"event,omitempty"`
}

// recoveryActionEvent marks a record of a changed recovery action.
const recoveryActionEvent = "recoveryAction"

// The driver changes the GPU's state before it reports the XID, and the
// fake does the same: the recovery action (and, for XID 79, the loss) is
// recorded first and the event appended after, so a client that reads the
// GPU on receiving the event finds the state the event reports. For XID 79
// this is the order of real hardware: the GPU has already fallen off the
// bus when the driver reports it (NVIDIA, "XID Errors",
// https://docs.nvidia.com/deploy/xid-errors/: XID 79, "GPU has fallen off
// the bus"). Appending first let the kubelet plugin's recheck read the old
// state and clear the health taint it had just set.

// InjectXID records an XID error on the GPU or MIG device with the given
// UUID in stateDir. Every Server over stateDir whose event set has the
// GPU registered for nvml.EventTypeXidCriticalError receives it from
// EventSet.Wait, after the state change the XID causes is in place.
func InjectXID(stateDir, uuid string, xid uint64) error {
	if stateDir == "" {
		return errors.New("inject XID: no state directory")
	}
	if err := checkXIDUUID(uuid); err != nil {
		return err
	}
	changed := ""
	if err := mutateStateDir(stateDir, func(st *state) error {
		changed = recordRecovery(st, uuid, xid)
		return nil
	}); err != nil {
		return fmt.Errorf("inject XID: %w", err)
	}
	path := filepath.Join(stateDir, eventsFileName)
	if err := appendRecord(path, xidRecord{UUID: uuid, XID: xid}); err != nil {
		return fmt.Errorf("inject XID: %w", err)
	}
	if changed != "" {
		if err := appendRecord(path, xidRecord{UUID: changed, Event: recoveryActionEvent}); err != nil {
			return fmt.Errorf("inject XID: %w", err)
		}
	}
	return nil
}

// checkXIDUUID refuses what is neither a GPU nor a MIG device UUID.
func checkXIDUUID(uuid string) error {
	if !strings.HasPrefix(uuid, "GPU-") && !strings.HasPrefix(uuid, "MIG-") {
		return fmt.Errorf("inject XID: %q is not a GPU-… or MIG-… UUID", uuid)
	}
	return nil
}

// appendRecord appends one record to the event log file at path.
func appendRecord(path string, rec xidRecord) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// One write of a short line to an O_APPEND file is atomic, so
	// concurrent injectors never interleave.
	if _, err := f.Write(append(line, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// InjectXID records an XID error on one of this Server's GPUs (or MIG
// devices); it works without a state directory too.
func (s *Server) InjectXID(uuid string, xid uint64) error {
	if s.events.path != "" {
		return InjectXID(s.opts.StateDir, uuid, xid)
	}
	if err := checkXIDUUID(uuid); err != nil {
		return err
	}
	// State first, event after: see InjectXID.
	changed := ""
	if err := s.store.mutate(func(st *state) error {
		changed = recordRecovery(st, uuid, xid)
		return nil
	}); err != nil {
		return fmt.Errorf("inject XID: %w", err)
	}
	s.events.appendMem(xidRecord{UUID: uuid, XID: xid})
	if changed != "" {
		s.events.appendMem(xidRecord{UUID: changed, Event: recoveryActionEvent})
	}
	return nil
}

// appendMem appends a record to the in-memory log of a Server without a
// state directory.
func (l *eventLog) appendMem(rec xidRecord) {
	line, _ := json.Marshal(rec) // a struct of strings and a number
	l.mu.Lock()
	l.mem = append(append(l.mem, line...), '\n')
	l.mu.Unlock()
}

// eventLog reads the XID log: the file in the state directory, or an
// in-memory buffer for a Server without one.
type eventLog struct {
	path string

	mu  sync.Mutex
	mem []byte
}

func newEventLog(stateDir string) *eventLog {
	if stateDir == "" {
		return &eventLog{}
	}
	return &eventLog{path: filepath.Join(stateDir, eventsFileName)}
}

// end is the log's current length: events before it are history.
func (l *eventLog) end() int64 {
	if l.path == "" {
		l.mu.Lock()
		defer l.mu.Unlock()
		return int64(len(l.mem))
	}
	fi, err := os.Stat(l.path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// loggedXID is a record and where it lies in the log.
type loggedXID struct {
	xidRecord
	// start and end are the offsets of the record's line.
	start, end int64
}

// readFrom returns the complete records after offset. A line still being
// written is left for the next read; a line that is not a record is
// skipped.
func (l *eventLog) readFrom(offset int64) ([]loggedXID, error) {
	data, err := l.tail(offset)
	if err != nil {
		return nil, err
	}
	var recs []loggedXID
	for {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			return recs, nil
		}
		r := loggedXID{start: offset, end: offset + int64(nl) + 1}
		if err := json.Unmarshal(data[:nl], &r.xidRecord); err != nil {
			r.UUID = "" // matches no device
		}
		recs = append(recs, r)
		data, offset = data[nl+1:], r.end
	}
}

func (l *eventLog) tail(offset int64) ([]byte, error) {
	if l.path == "" {
		l.mu.Lock()
		defer l.mu.Unlock()
		if offset >= int64(len(l.mem)) {
			return nil, nil
		}
		return bytes.Clone(l.mem[offset:]), nil
	}
	f, err := os.Open(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}
