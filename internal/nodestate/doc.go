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

// Package nodestate prepares and unprepares the devices allocated to
// ResourceClaims on one node, crash-safely.
//
// Every claim moves through the checkpoint as PrepareStarted → PrepareCompleted
// → (removed). A claim is recorded as PrepareStarted, with the devices it is
// about to receive, before anything is created for it, and as
// PrepareCompleted only once its CDI spec is on disk. A plugin that dies in
// between leaves a PrepareStarted record, which Reconcile rolls back at the
// next start; the kubelet then retries the prepare from scratch. A claim
// recorded in a state this version does not know (a newer gpudra wrote it
// before a downgrade) is kept and reported, never rolled back: its
// containers may be running.
//
// MIG partitions are created between PrepareStarted and PrepareCompleted,
// one recorded step at a time (MIG mode switched on, GPU instance being
// created, its ID, compute instance, MIG UUID), so that a rollback destroys
// exactly what was created and nothing else; see mig.go and docs/mig.md.
// Sharing is set up in the same window and the same way: a time slice or
// an MPS control daemon (compute mode, daemon started, answering) is
// recorded before it is applied and reference-counted across the claims
// that share it, so that a rollback or the last unprepare restores exactly
// what gpudra changed; see sharing_*.go and docs/sharing.md. MIG and
// sharing combine (MPS on a MIG partition; shares of a GPU through MPS or
// time slices); what the hardware cannot do, such as a time-slice interval
// of a MIG partition's own, the config API refuses with the reason.
//
// # Locks, and the order they are taken in
//
// Prepares and unprepares of different claims run concurrently. Four locks
// keep them apart, always taken in this order, and a lock is never taken
// while one that comes after it is held:
//
//  1. the claim lock (State.claimLocks, by claim UID): held across a
//     claim's whole Prepare, Unprepare, rollback or spec repair, so one
//     claim changes in one goroutine at a time;
//  2. a GPU lock (State.gpuLocks, by GPU UUID): held across each change of
//     one GPU's hardware state (MIG mode, GPU and compute instances, the
//     compute mode and time slice, its MPS daemon) and the checkpoint
//     records of it; one GPU at a time, never two;
//  3. State.mu: guards the in-memory checkpoint and the commit
//     generations; held only to read or change them, never across a
//     hardware, CDI, MPS or checkpoint call, a commit, or another lock;
//  4. commits.mu (commit.go): guards the group commit's bookkeeping; the
//     writer releases it before it takes State.mu to snapshot, so the two
//     are never held together.
//
// A change is made under State.mu and made durable after it is released:
// commit waits for the batch that carries it (commit.go). A function named
// ...Locked expects a lock its caller holds: its comment says which
// (State.mu, or the GPU's lock). TestLockOrder checks these rules on the
// source.
//
// # Where things are
//
// State (state.go) is the node's checkpoint in memory, its locks and its
// public methods. The parts that change the node keep no state of their
// own: what they change is recorded in that checkpoint, so they are
// types whose methods are handed the State.
//
//   - prepare.go: Prepare, one preparation (a prepare in progress) step by
//     step; plan.go and shares.go, its checks; spec.go, the claim's CDI
//     spec; unprepare.go, rollback in prepare.go.
//   - mig.go: migPartitions, MIG partitions and MIG mode.
//   - sharing.go: the one dispatch on a device's sharing strategy, and
//     the sharingStrategy interface; sharing_mps*.go (mpsStrategy: the
//     daemon, its client environment, its start-up reconcile, the
//     plugin's health checks) with sharing_computemode.go;
//     sharing_timeslice.go (timeSlicingStrategy). docs/development.md,
//     "Add a sharing strategy", lists every file a new strategy touches.
//   - commit.go: the group commit that makes changes durable.
//   - reconcile.go: start-up; specwatch.go, specs lost while running.
//
// The package knows nothing of gRPC or the kubelet: the plugin layer calls
// Prepare and Unprepare and translates the results.
package nodestate
