package main

import "testing"

func TestSoftMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   string
		ratio   float64
		gomem   bool
		want    int64
		wantErr bool
	}{
		{name: "90 % of 512 Mi", limit: "536870912", ratio: 0.9, want: 483183820},
		{name: "no container limit", limit: "", ratio: 0.9, want: 0},
		{name: "ratio 0 leaves the runtime alone", limit: "536870912", ratio: 0, want: 0},
		{name: "GOMEMLIMIT wins", limit: "536870912", ratio: 0.9, gomem: true, want: 0},
		{name: "not bytes", limit: "512Mi", ratio: 0.9, wantErr: true},
		{name: "ratio above 1", limit: "536870912", ratio: 1.5, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := softMemoryLimit(tc.limit, tc.ratio, tc.gomem)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("got %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
