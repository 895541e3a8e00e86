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
//
// The package knows nothing of gRPC or the kubelet: the plugin layer calls
// Prepare and Unprepare and translates the results.
package nodestate
