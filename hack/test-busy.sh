#!/usr/bin/env bash
# make test-busy: the tests whose checks depend on scheduling (republish
# counts, polls, timeouts, goroutine interleaving) run over and over while
# two CPU-bound processes keep the machine busy, as on a loaded CI runner.
# A test that passes here only by luck on an idle machine fails here.
#
#   BUSY_RUNS      how many times each test runs (go test -count; default 10)
#   BUSY_PACKAGES  the packages (default: those with such tests)
#   BUSY_RUN       go test -run pattern (default: those tests)
#   BUSY_HOGS      how many CPU-bound processes run beside them (default 2)
#   BUSY_TIMEOUT   go test -timeout, and how long the hogs may run (default 30m)
#   BUSY_CMD       a whole command to run beside the hogs instead of the
#                  list, e.g. BUSY_CMD='make test' BUSY_TIMEOUT=60m
#
# The hogs run under `timeout` (never longer than the tests may) and are
# killed on exit, whatever the tests do.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=1 CGO_CFLAGS=${CGO_CFLAGS:--Wno-deprecated-declarations}

runs=${BUSY_RUNS:-10}
hogs=${BUSY_HOGS:-2}
timeout=${BUSY_TIMEOUT:-30m}
# The default: tests that count writes or publishes, bound a wait in
# seconds, or test goroutine interleaving (on synctest's clock): the
# publish and health tests of the in-process node, the MPS daemons, the
# fake NVML's events, the webhook's timeouts, the controller's shutdown and
# leases, group commit, the call gate and the fleet trigger.
packages=${BUSY_PACKAGES:-./internal/simulate/ ./internal/plugin/ ./internal/fleet/ ./internal/discovery/ ./internal/nvmlfake/ ./internal/mps/ ./internal/mpsstandin/ ./internal/admission/ ./internal/nodestate/ ./internal/slicebuilder/ ./internal/controller/ ./internal/nvlinkpools/ ./internal/imexstandin/ ./internal/imexready/}
tests=(
  # internal/simulate
  TestConcurrentPreparesKeepTheGeneration TestPublishOneSliceAtATime TestXIDTaintsDevice
  TestHealthRecovers TestSteadyStateNoWrites TestReadyMeansPublished
  TestHungMPSDaemonIsReplaced TestWedgedMPSDaemonNotAdopted TestWipedDaemonDirectory
  TestMigConcurrentPrepares TestMigModeOffWhenUnpreparesOverlap
  # internal/plugin, internal/fleet (synctest)
  TestCallGateYield TestTriggerBoundsRecomputes
  # internal/discovery, internal/nvmlfake
  TestWatchHealth TestHealthRecovers TestWatchStartsFromCurrentHealth TestInjectedXIDReachesWait TestMIGXIDNamesTheInstance
  # internal/mps, internal/mpsstandin
  TestHungDaemonIsNotReady TestProcessLauncherLifecycle TestConcurrentStartsStartOne
  TestAnswersAndQuits TestSIGTERMAndStaleSocket TestOutlivesItsDirectoryLikeTheRealDaemon
  # internal/admission
  TestWebhookBoundsWorkPerReview TestWebhookCutsSlowUploads TestWebhookBoundsConcurrentMemory
  # internal/nodestate, internal/slicebuilder
  TestGroupCommit TestGroupCommitGathersArrivals TestUnprepareWaitsForPrepare TestConcurrentPrepare TestSteadyStatePublish
  # internal/controller
  TestControllerMetricsFollowTheCluster TestLeaderElection TestServingFailureGivesTheLeaseUp TestWebhookAlone
  TestSparesFollowTheFleet TestFleetHeapPerNode
  # internal/nvlinkpools, internal/imexstandin, internal/imexready, internal/plugin (IMEX)
  TestLabelsAndPools TestIMEXReadyLabel TestStopTellsPeersAndRestartReconnects TestHangStopsAnswering
  TestProcessesSeeEachOtherHungAndKilled TestProbeFollowsTheDaemon TestRunReportsFlips TestIMEXDaemonReadiness
)
run=${BUSY_RUN:-^($(IFS='|'; echo "${tests[*]}"))$}

# Build first, so the hogs only slow the tests down, not the compiler.
# shellcheck disable=SC2086
if [ -z "${BUSY_CMD:-}" ]; then go test -count=1 -run '^$' $packages >/dev/null; fi

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM
for _ in $(seq "$hogs"); do
  timeout "$timeout" sh -c 'while :; do :; done' &
  pids+=($!)
done
if [ -n "${BUSY_CMD:-}" ]; then
  echo "test-busy: $hogs CPU-bound processes running; $BUSY_CMD"
  # shellcheck disable=SC2086
  timeout "$timeout" $BUSY_CMD
  exit
fi
echo "test-busy: $hogs CPU-bound processes running; go test -count=$runs -run '$run' $packages"
# shellcheck disable=SC2086
go test -count="$runs" -timeout "$timeout" -run "$run" $packages
