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

package nodestate

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpudra/gpudra/internal/checkpoint"
)

// Group commit.
//
// Every change to the checkpoint must be on disk before the work it guards
// goes ahead (PrepareStarted before anything is created, PrepareCompleted
// before the kubelet hears of success). A durable write costs two fsyncs
// (the file and its directory), tens of milliseconds on a busy disk, and
// eight pods landing on a node at once used to queue their sixteen writes
// one behind the other. Instead, a change is made in memory under s.mu and
// the caller then waits, without s.mu, until a write that includes it is
// durable. While one write is in flight the changes that arrive queue up,
// and the next write carries all of them: one pair of fsyncs per batch, not
// per change.
//
// What makes this as safe as one write per change:
//
//   - Each write is a snapshot of the whole in-memory checkpoint, and
//     snapshots are taken in order, so the file always holds every change up
//     to some point and none after it: a crash anywhere loses a suffix of
//     the changes, never one from the middle.
//   - A caller waits for its change to be durable before it acts on it, as
//     before, so whatever the lost suffix recorded had not been acted on.
//   - A write that fails takes its changes back out of memory before the
//     next snapshot is taken, so memory never keeps, and a later write never
//     carries, a change whose caller was told it failed.
//   - The checks that keep two claims off one device look at the union of
//     the memory and the file (durable): a change that frees a device (an
//     unprepared claim forgotten) frees it for others only once it is on
//     disk, so a failed write can never leave two claims on one device.
//
// The undo of a failed change is per key (a claim UID, a GPU UUID), and only
// one caller changes a key at a time: the claim lock and the GPU lock are
// held across the change and the wait. So undoing a failed batch never
// undoes a newer change queued behind it.
type commits struct {
	// Guarded by State.mu:
	//
	// gen numbers the changes made to State.cp; pending holds the undo of
	// each change not yet durable, oldest first; durable is what the file
	// holds (the last snapshot written, or what New loaded).
	gen     uint64
	pending []pendingChange
	durable *checkpoint.Checkpoint

	// arriving counts the prepares that have started but not yet made
	// their first change (PrepareStarted): the writer of a batch waits a
	// moment for them (gatherArrivals). Atomic: read and changed without
	// either lock.
	arriving atomic.Int64
	// maxGather bounds that wait (defaultMaxGather; tests lengthen it).
	maxGather time.Duration

	// mu guards the fields below; never held while taking State.mu.
	mu   sync.Mutex
	cond *sync.Cond
	// writing is set while a caller writes a batch.
	writing bool
	// written is the newest generation on disk.
	written uint64
	// finished counts the writes that ended; lastGen and lastErr are the
	// generation the last one carried and how it ended.
	finished uint64
	lastGen  uint64
	lastErr  error
}

type pendingChange struct {
	gen  uint64
	undo func()
}

// changedLocked registers a change just made to s.cp, with the function that
// takes it back out should its write fail, and returns the generation that
// commit must see written. The caller holds s.mu, and must call commit
// before it acts on the change. A nil undo suits a change that needs none.
func (s *State) changedLocked(undo func()) uint64 {
	s.commits.gen++
	if undo != nil {
		s.commits.pending = append(s.commits.pending, pendingChange{gen: s.commits.gen, undo: undo})
	}
	return s.commits.gen
}

// commit blocks until the checkpoint on disk includes generation gen, or a
// write that carried it failed. The caller must not hold s.mu.
//
// The first caller that finds no write in flight writes the batch itself;
// the others wait for it, and one of them writes the next batch if theirs
// was not in it. A failed write fails exactly the callers whose change it
// carried; a caller that arrives after a failure starts a new write.
func (s *State) commit(gen uint64) error {
	c := &s.commits
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := c.finished
	for c.written < gen {
		if c.finished != seen && c.lastGen >= gen && c.lastErr != nil {
			return c.lastErr
		}
		if c.writing {
			c.cond.Wait()
			continue
		}
		c.writing = true
		c.mu.Unlock()
		c.gatherArrivals()
		written, err := s.writeBatch()
		c.mu.Lock()
		c.writing = false
		c.finished++
		c.lastGen, c.lastErr = written, err
		if err == nil {
			c.written = max(c.written, written)
		}
		c.cond.Broadcast()
	}
	return nil
}

// defaultMaxGather bounds how long the writer of a batch waits for
// arriving prepares (gatherArrivals).
const defaultMaxGather = 2 * time.Millisecond

// gatherArrivals waits, at most commits.maxGather, until no prepare is on its way
// to its first change. Pods that land on a node together reach the plugin
// within a millisecond or so of each other: without the wait the first
// one's PrepareStarted goes out alone and the others', queued behind it,
// take a second write, so every claim of the burst but the first waits
// for two writes before it can even start. A prepare that comes alone
// finds no other arriving and does not wait. Waiting changes only which
// changes a batch carries, never what a caller may do before its change
// is durable.
func (c *commits) gatherArrivals() {
	if c.arriving.Load() == 0 {
		return
	}
	deadline := time.Now().Add(c.maxGather)
	for c.arriving.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
	}
}

// writeBatch writes a snapshot of s.cp and returns the generation it
// carries. If the snapshot did not reach the disk, it undoes that
// snapshot's changes before it returns, and so before any other snapshot
// can be taken (the caller holds the writing flag).
func (s *State) writeBatch() (uint64, error) {
	s.mu.Lock()
	snap := s.cp.Clone()
	snap.BootID = s.opts.BootID
	gen := s.commits.gen
	s.mu.Unlock()

	saved, err := s.writeSnapshot(snap)

	s.mu.Lock()
	defer s.mu.Unlock()
	carried := 0
	for carried < len(s.commits.pending) && s.commits.pending[carried].gen <= gen {
		carried++
	}
	if !saved {
		for i := carried - 1; i >= 0; i-- {
			s.commits.pending[i].undo()
		}
	}
	s.commits.pending = s.commits.pending[carried:]
	if saved {
		s.commits.durable = snap
		s.cp.BootID = snap.BootID
	}
	return gen, err
}

// writeSnapshot writes one batch and says whether it reached the disk,
// with the crash points tests inject: a crash after the write returns an
// error although the batch is saved.
func (s *State) writeSnapshot(snap *checkpoint.Checkpoint) (saved bool, err error) {
	if h := s.opts.Hooks.BeforeCheckpointWrite; h != nil {
		if err := h(); err != nil {
			return false, crash(err)
		}
	}
	if err := s.opts.Checkpoint.Save(snap); err != nil {
		return false, fmt.Errorf("write checkpoint: %w", err)
	}
	if h := s.opts.Hooks.AfterCheckpointWrite; h != nil {
		if err := h(); err != nil {
			return true, crash(err)
		}
	}
	return true, nil
}

// heldLocked calls fn with every claim record that holds devices in memory
// or on disk, skipping the claim except; a record present in both is seen
// twice. The caller holds s.mu. Checks that keep devices apart use it:
// a device is free only when neither says it is taken.
func (s *State) heldLocked(except string, fn func(uid string, c checkpoint.Claim) (stop bool)) {
	for _, claims := range []map[string]checkpoint.Claim{s.cp.Claims, s.commits.durable.Claims} {
		for uid, c := range claims {
			if uid != except && fn(uid, c) {
				return
			}
		}
	}
}

// putEntryLocked records v under key in one of the checkpoint's maps (or,
// with v nil, forgets key) and returns the generation to commit; should
// the write fail, the entry is put back as it was. v must not share memory
// with what the caller keeps. The caller holds s.mu.
func putEntryLocked[V any](s *State, m *map[string]V, key string, v *V) uint64 {
	prev, had := (*m)[key]
	set := func(v *V) {
		if v == nil {
			delete(*m, key)
			return
		}
		if *m == nil {
			*m = map[string]V{}
		}
		(*m)[key] = *v
	}
	set(v)
	return s.changedLocked(func() {
		if had {
			set(&prev)
		} else {
			set(nil)
		}
	})
}
