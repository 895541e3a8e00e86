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
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// writerEnv makes the test binary a process that rewrites the state in a
// loop until it is killed (TestStateFileSurvivesKill); its value is
// "<dir>:<round>".
const writerEnv = "GPUDRA_NVMLFAKE_TEST_WRITER"

func TestMain(m *testing.M) {
	if v := os.Getenv(writerEnv); v != "" {
		dir, round, _ := strings.Cut(v, ":")
		writeForever(dir, round)
	}
	os.Exit(m.Run())
}

// writeForever rewrites a state of 64 GPUs (a large file, so that kills
// land inside writes), counting in BootID as "<round>-<n>".
func writeForever(dir, round string) {
	st, err := newStore(dir, klog.Logger{})
	if err != nil {
		panic(err)
	}
	for i := 0; ; i++ {
		if err := st.mutate(func(s *state) error {
			s.BootID = fmt.Sprintf("%s-%d", round, i)
			for g := range 64 {
				s.GPUs[fmt.Sprintf("GPU-%d", g)] = &gpuState{MigMode: 1, MigPendingMode: 1,
					GpuInstances: []giState{{ID: uint32(i % 7), ProfileID: 19, Start: uint32(i % 7), Size: 1}}}
			}
			return nil
		}); err != nil {
			panic(err)
		}
	}
}

// TestStateFileSurvivesKill kills processes while they rewrite the state
// (SIGKILL: no deferred clean-up runs) and checks that the next process
// always reads a whole state. The write is atomic across process crashes,
// which is all the fake promises without fsync.
func TestStateFileSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	for round := range 5 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d", writerEnv, dir, round))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill it once it is writing, at a different moment each round.
		prefix := fmt.Sprintf("%d-", round)
		if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return strings.HasPrefix(readBootID(t, dir), prefix), nil
		}); err != nil {
			_ = cmd.Process.Kill()
			t.Fatalf("round %d: the writer wrote nothing in 30 s", round)
		}
		time.Sleep(time.Duration(3*round) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()

		st, err := newStore(dir, klog.Logger{})
		if err != nil {
			t.Fatal(err)
		}
		var boot string
		var gpus int
		if err := st.view(func(s *state) { boot, gpus = s.BootID, len(s.GPUs) }); err != nil {
			t.Fatalf("round %d: state after the kill: %v", round, err)
		}
		if !strings.HasPrefix(boot, prefix) || gpus != 64 {
			t.Fatalf("round %d: state after the kill has BootID %q and %d GPUs, want %q… and 64", round, boot, gpus, prefix)
		}
	}
}

// readBootID reads the BootID from the state file, "" while there is none.
func readBootID(t *testing.T, dir string) string {
	t.Helper()
	st, err := newStore(dir, klog.Logger{})
	if err != nil {
		t.Fatal(err)
	}
	var boot string
	if err := st.view(func(s *state) { boot = s.BootID }); err != nil {
		t.Fatalf("state while the writer runs: %v", err)
	}
	return boot
}
