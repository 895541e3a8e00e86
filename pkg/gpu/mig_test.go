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
	for _, bad := range []string{"gpu-", "gpu-01", "gpu-1-mig-", "gpu-1-mig-1g10gb", "gpu-1-mig-1g10gb-x", "mig-1", "gpu-1-mig--3"} {
		if p, ok := ParseDeviceName(bad); ok {
			t.Errorf("ParseDeviceName(%q) = %+v, want failure", bad, p)
		}
	}
	if p, ok := ParseDeviceName("gpu-12"); !ok || p.MIG || p.Minor != 12 {
		t.Errorf("ParseDeviceName(gpu-12) = %+v, %v", p, ok)
	}
}

func TestMigMemoryGB(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		profileMiB, totalMiB uint64
		want                 int
	}{
		{4864, 40960, 5}, {9856, 40960, 10}, {19968, 40960, 20}, {40192, 40960, 40}, // A100 40GB
		{9856, 81920, 10}, {80384, 81920, 80}, // A100 80GB
		{9856, 81559, 10}, {81920, 81920, 80}, // H100 (real total) and the mock
		{18432, 144384, 18}, {35840, 144384, 35}, {72704, 144384, 71}, {144384, 144384, 141}, // H200
		{23552, 184320, 23}, {92160, 184320, 90}, // B200
	} {
		if got := MigMemoryGB(tc.profileMiB, tc.totalMiB*mib, 8); got != tc.want {
			t.Errorf("MigMemoryGB(%d of %d MiB) = %d, want %d", tc.profileMiB, tc.totalMiB, got, tc.want)
		}
	}
}
