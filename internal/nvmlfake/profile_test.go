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
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestProfiles: every built-in profile is listed, in order, and resolves.
func TestProfiles(t *testing.T) {
	got := Profiles()
	if len(got) != len(builtinProfiles) || !sort.StringsAreSorted(got) {
		t.Fatalf("Profiles() = %v: want every built-in profile, sorted", got)
	}
	for _, name := range got {
		if _, err := loadProfile(name); err != nil {
			t.Errorf("built-in profile %s: %v", name, err)
		}
	}
}

func TestBuiltinProfiles(t *testing.T) {
	tests := []struct {
		profile string
		names   []string // by index
		driver  string
		cuda    int
	}{
		{"dgx-a100", repeat("NVIDIA A100-SXM4-40GB", 8), "550.54.15", 12040},
		{"dgx-h100", repeat("NVIDIA H100 80GB HBM3", 8), "550.54.15", 12040},
		{"dgx-h200", repeat("NVIDIA H200", 8), "550.54.15", 12040},
		{"dgx-b200", repeat("NVIDIA B200", 8), "570.124.06", 12080},
		{"mixed", append(append(repeat("NVIDIA H100 80GB HBM3", 4), repeat("NVIDIA A100-SXM4-40GB", 4)...), "NVIDIA L4"), "550.54.15", 12040},
	}
	for _, tc := range tests {
		t.Run(tc.profile, func(t *testing.T) {
			s := start(t, tc.profile, "node-a", "")
			n, _ := s.DeviceGetCount()
			if n != len(tc.names) {
				t.Fatalf("DeviceGetCount = %d, want %d", n, len(tc.names))
			}
			for i, want := range tc.names {
				if name, _ := device(t, s, i).GetName(); name != want {
					t.Errorf("GPU %d name = %q, want %q", i, name, want)
				}
			}
			if v, _ := s.SystemGetDriverVersion(); v != tc.driver {
				t.Errorf("driver = %q, want %q", v, tc.driver)
			}
			if v, _ := s.SystemGetCudaDriverVersion(); v != tc.cuda {
				t.Errorf("CUDA = %d, want %d", v, tc.cuda)
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestProfileFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr string // substring; empty for success
		check   func(t *testing.T, s *Server)
	}{
		{
			name: "two islands and a PCIe card",
			content: `driverVersion: "560.35.03"
cudaDriverVersion: "12.6"
gpus:
- model: h200-sxm5-141gb
  nvlinkIsland: 3
- model: NVIDIA H200
  nvlinkIsland: 3
- model: b200-sxm-180gb
  nvlinkIsland: 1
  migEnabled: true
- model: l4
`,
			check: func(t *testing.T, s *Server) {
				if v, _ := s.SystemGetCudaDriverVersion(); v != 12060 {
					t.Errorf("CUDA = %d, want 12060", v)
				}
				st, _ := device(t, s, 0).GetP2PStatus(device(t, s, 1), nvml.P2P_CAPS_INDEX_NVLINK)
				if st != nvml.P2P_STATUS_OK {
					t.Errorf("GPUs 0 and 1 share island 3 but P2P NVLink = %v", st)
				}
				if cur, _, _ := device(t, s, 2).GetMigMode(); cur != nvml.DEVICE_MIG_ENABLE {
					t.Errorf("GPU 2 MIG mode = %d, want enabled from the profile", cur)
				}
			},
		},
		{
			name:    "a built-in profile by name",
			content: "profile: mixed\n",
			check: func(t *testing.T, s *Server) {
				if n, _ := s.DeviceGetCount(); n != 9 {
					t.Errorf("%d GPUs, want the 9 of the mixed profile", n)
				}
				if name, _ := device(t, s, 8).GetName(); name != "NVIDIA L4" {
					t.Errorf("GPU 8 is %q, want the mixed profile's L4", name)
				}
			},
		},
		{name: "unknown built-in profile", content: "profile: dgx-z900\n", wantErr: `profile "dgx-z900" is not a built-in profile (dgx-a100,`},
		{name: "built-in profile and GPUs", content: "profile: dgx-h100\ngpus:\n- model: l4\n", wantErr: "drop driverVersion, cudaDriverVersion and gpus, or drop profile"},
		{name: "unknown model", content: "gpus:\n- model: v100\n", wantErr: `unknown GPU model "v100" (valid: a100-sxm4-40gb`},
		{name: "NVLink on a PCIe card", content: "gpus:\n- model: l4\n  nvlinkIsland: 0\n", wantErr: "has no NVLink"},
		{name: "MIG on a non-MIG GPU", content: "gpus:\n- model: l4\n  migEnabled: true\n", wantErr: "does not support MIG"},
		{name: "unknown field", content: "gpus:\n- model: l4\n  nvlink: 0\n", wantErr: "unknown field"},
		{name: "no GPUs", content: "gpus: []\n", wantErr: "no GPUs"},
		{name: "bad CUDA version", content: "cudaDriverVersion: \"12\"\ngpus:\n- model: l4\n", wantErr: "want major.minor"},
		{name: "too many GPUs", content: "gpus:\n" + strings.Repeat("- model: l4\n", 17), wantErr: "at most 16"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "profile.yaml")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := New(Options{Profile: path, NodeName: "n"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s.Init()
			defer s.Shutdown()
			tc.check(t, s)
		})
	}
}

func TestUnknownProfileListsBuiltins(t *testing.T) {
	_, err := New(Options{Profile: "dgx-z900", NodeName: "n"})
	if err == nil || !strings.Contains(err.Error(), "dgx-a100, dgx-b200, dgx-h100, dgx-h200, gb200-tray, mixed") {
		t.Fatalf("error = %v, want the built-in profiles listed", err)
	}
}

func TestNodeNameRequired(t *testing.T) {
	if _, err := New(Options{Profile: "dgx-h100"}); err == nil {
		t.Fatal("New without a node name succeeded")
	}
}
