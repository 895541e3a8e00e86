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

package gpu

import "testing"

func TestMigNames(t *testing.T) {
	for _, tc := range []struct {
		profile string
		start   int
		want    string
	}{
		{"1g.10gb", 3, "gpu-0-mig-1g10gb-3"},
		{"1g.20gb", 4, "gpu-0-mig-1g20gb-4"},
		{"1g.10gb+me", 0, "gpu-0-mig-1g10gbme-0"},
		{"1g.10gb-me", 0, "gpu-0-mig-1g10gbnome-0"},
		{"1g.10gb+me.all", 0, "gpu-0-mig-1g10gbmeall-0"},
		{"7g.141gb", 0, "gpu-0-mig-7g141gb-0"},
	} {
		got := MigDeviceName(0, tc.profile, tc.start)
		if got != tc.want {
			t.Errorf("MigDeviceName(%s, %d) = %s, want %s", tc.profile, tc.start, got, tc.want)
		}
		p, ok := ParseDeviceName(got)
		if !ok || !p.MIG || p.Minor != 0 || p.Start != tc.start || p.ProfileToken != MigProfileToken(tc.profile) {
			t.Errorf("ParseDeviceName(%s) = %+v, %v", got, p, ok)
		}
	}
	for _, bad := range []string{"gpu-", "gpu-01", "gpu-1-mig-", "gpu-1-mig-1g10gb", "gpu-1-mig-1g10gb-x", "mig-1", "gpu-1-mig--3",
		"gpu--monitor", "gpu-01-monitor", "gpu-x-monitor"} {
		if p, ok := ParseDeviceName(bad); ok {
			t.Errorf("ParseDeviceName(%q) = %+v, want failure", bad, p)
		}
	}
	if p, ok := ParseDeviceName("gpu-12"); !ok || p.MIG || p.Monitor || p.Minor != 12 {
		t.Errorf("ParseDeviceName(gpu-12) = %+v, %v", p, ok)
	}
	if got := MonitorDeviceName(3); got != "gpu-3-monitor" {
		t.Errorf("MonitorDeviceName(3) = %s", got)
	}
	if p, ok := ParseDeviceName("gpu-3-monitor"); !ok || !p.Monitor || p.MIG || p.Minor != 3 {
		t.Errorf("ParseDeviceName(gpu-3-monitor) = %+v, %v", p, ok)
	}
}

func TestMigMemoryGB(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		profileMiB, totalMiB uint64
		want                 int
	}{
		// nvidia-smi mig -lgip sizes and NVML totals of real GPUs (see
		// internal/nvmlfake/testdata/calibration), and the names nvidia-smi
		// gives them.
		{4864, 40960, 5}, {9856, 40960, 10}, {19968, 40960, 20}, {40192, 40960, 40}, // A100 40GB
		{9728, 81920, 10}, {19968, 81920, 20}, {40192, 81920, 40}, {80896, 81920, 80}, // A100 80GB
		{9984, 81559, 10}, {20096, 81559, 20}, {40448, 81559, 40}, {81152, 81559, 80}, // H100
		{16384, 143771, 18}, {33024, 143771, 35}, {71168, 143771, 71}, {143104, 143771, 141}, // H200
		{20992, 183359, 23}, {22528, 183359, 23}, {45312, 183359, 45}, {91136, 183359, 90}, {182784, 183359, 180}, // B200 (22.00 GiB on early R570)
		// Nominal sizes that round a little up (go-nvml's mock tables) are
		// not taken for the next slice.
		{9856, 81559, 10}, {81920, 81920, 80}, {18432, 144384, 18}, {72704, 144384, 71},
	} {
		if got := MigMemoryGB(tc.profileMiB, tc.totalMiB*mib, 8); got != tc.want {
			t.Errorf("MigMemoryGB(%d of %d MiB) = %d, want %d", tc.profileMiB, tc.totalMiB, got, tc.want)
		}
	}
}
