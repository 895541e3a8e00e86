package spelling

import "testing"

func TestClosest(t *testing.T) {
	for _, tt := range []struct {
		name       string
		candidates []string
		want       string
	}{
		{"nvlinkgroup", []string{"nvlinkGroup", "index"}, "nvlinkGroup"}, // case only
		{"productNme", []string{"productName", "uuid"}, "productName"},
		{"memroy", []string{"memory", "multiprocessors"}, "memory"},
		{"gpu.gpudra.oi", []string{"gpu.gpudra.io"}, "gpu.gpudra.io"},
		{"cores", []string{"memory", "multiprocessors"}, ""}, // nothing close
		{"ab", []string{"xy"}, ""},
		{"x", nil, ""},
	} {
		if got := Closest(tt.name, tt.candidates); got != tt.want {
			t.Errorf("Closest(%q, %v) = %q, want %q", tt.name, tt.candidates, got, tt.want)
		}
	}
}
