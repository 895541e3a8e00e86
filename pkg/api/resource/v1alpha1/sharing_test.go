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

package v1alpha1

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func gpuWith(s *Sharing) *GpuConfig {
	return &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"compute", "utility"}, Sharing: s}
}

func migWith(s *Sharing) *MigConfig {
	return &MigConfig{TypeMeta: migTypeMeta, DriverCapabilities: []string{"compute", "utility"}, Sharing: s}
}

func quantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func TestSharingAccepts(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want Config
	}{
		{
			name: "time-slicing defaults to the Default interval",
			raw:  `{` + header + `,"kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`,
			want: gpuWith(&Sharing{Strategy: TimeSlicingStrategy, TimeSlicing: &TimeSlicingConfig{Interval: DefaultTimeSlice}}),
		},
		{
			name: "an empty timeSlicing gets the Default interval too",
			raw:  `{` + header + `,"kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{}}}`,
			want: gpuWith(&Sharing{Strategy: TimeSlicingStrategy, TimeSlicing: &TimeSlicingConfig{Interval: DefaultTimeSlice}}),
		},
		{
			name: "every interval",
			raw:  `{` + header + `,"kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}}`,
			want: gpuWith(&Sharing{Strategy: TimeSlicingStrategy, TimeSlicing: &TimeSlicingConfig{Interval: LongTimeSlice}}),
		},
		{
			name: "MPS without limits",
			raw:  `{` + header + `,"kind":"GpuConfig","sharing":{"strategy":"MPS"}}`,
			want: gpuWith(&Sharing{Strategy: MPSStrategy, MPS: &MPSConfig{}}),
		},
		{
			name: "MPS with every limit",
			raw: `{` + header + `,"kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":50,` +
				`"defaultPinnedDeviceMemoryLimit":"10Gi","perDevicePinnedMemoryLimits":{"0":"20Gi","GPU-8932f937-d72c-4106-c12f-20bd9faed9f6":"1Mi"}}}}`,
			want: gpuWith(&Sharing{Strategy: MPSStrategy, MPS: &MPSConfig{
				DefaultActiveThreadPercentage:  ptr.To[int32](50),
				DefaultPinnedDeviceMemoryLimit: quantity("10Gi"),
				PerDevicePinnedMemoryLimits: map[string]resource.Quantity{
					"0": resource.MustParse("20Gi"), "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6": resource.MustParse("1Mi"),
				},
			}}),
		},
		{
			name: "percentage bounds",
			raw:  `{` + header + `,"kind":"MigConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":100}}}`,
			want: migWith(&Sharing{Strategy: MPSStrategy, MPS: &MPSConfig{DefaultActiveThreadPercentage: ptr.To[int32](100)}}),
		},
		{
			name: "MPS on a MIG partition, keyed by ordinal",
			raw:  `{` + header + `,"kind":"MigConfig","sharing":{"strategy":"MPS","mps":{"perDevicePinnedMemoryLimits":{"0":"4Gi"}}}}`,
			want: migWith(&Sharing{Strategy: MPSStrategy, MPS: &MPSConfig{PerDevicePinnedMemoryLimits: map[string]resource.Quantity{
				"0": resource.MustParse("4Gi")}}}),
		},
		{
			name: "MIG partitions take time-slicing at the Default interval",
			raw:  `{` + header + `,"kind":"MigConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Default"}}}`,
			want: migWith(&Sharing{Strategy: TimeSlicingStrategy, TimeSlicing: &TimeSlicingConfig{Interval: DefaultTimeSlice}}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode([]byte(tc.raw))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decode = %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestSharingRejects pins the exact messages a user reads in the pod's
// events (and in gpudra check's and the admission controller's output).
func TestSharingRejects(t *testing.T) {
	gpu := `{` + header + `,"kind":"GpuConfig","sharing":`
	tests := []struct {
		name, raw, wantErr string
	}{
		{"no strategy", gpu + `{}}`,
			`parameters.sharing.strategy: Required value: set TimeSlicing or MPS, or remove sharing`},
		{"strategy is case-sensitive", gpu + `{"strategy":"mps"}}`,
			`parameters.sharing.strategy: Unsupported value: "mps": supported values: "TimeSlicing", "MPS"`},
		{"unknown strategy", gpu + `{"strategy":"SpacePartitioning"}}`,
			`parameters.sharing.strategy: Unsupported value: "SpacePartitioning": supported values: "TimeSlicing", "MPS"`},
		{"timeSlicing with MPS", gpu + `{"strategy":"MPS","timeSlicing":{"interval":"Long"}}}`,
			`parameters.sharing.timeSlicing: Forbidden: applies only with strategy TimeSlicing, not "MPS": remove timeSlicing or set strategy: TimeSlicing`},
		{"mps with TimeSlicing", gpu + `{"strategy":"TimeSlicing","mps":{}}}`,
			`parameters.sharing.mps: Forbidden: applies only with strategy MPS, not "TimeSlicing": remove mps or set strategy: MPS`},
		{"unknown interval", gpu + `{"strategy":"TimeSlicing","timeSlicing":{"interval":"long"}}}`,
			`parameters.sharing.timeSlicing.interval: Unsupported value: "long": supported values: "Default", "Short", "Medium", "Long"`},
		{"an interval on a MIG partition", `{` + header + `,"kind":"MigConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Short"}}}`,
			`parameters.sharing.timeSlicing.interval: Invalid value: "Short": a MIG partition cannot have its own time-slice interval: it is a setting of the whole GPU; use Default (or omit it), or share a whole GPU with a GpuConfig`},
		{"percentage zero", gpu + `{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":0}}}`,
			`parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 0: must be a percentage from 1 to 100`},
		{"percentage above 100", gpu + `{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":101}}}`,
			`parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 101: must be a percentage from 1 to 100`},
		{"percentage as a string", gpu + `{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":"50%"}}}`,
			`parameters.sharing.mps.defaultActiveThreadPercentage: wrong type: got string, want integer`},
		{"pinned memory below 1Mi", gpu + `{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":"512Ki"}}}`,
			`parameters.sharing.mps.defaultPinnedDeviceMemoryLimit: Invalid value: "512Ki": must be at least 1Mi: MPS counts pinned device memory in whole MiB`},
		{"negative pinned memory", gpu + `{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":"-1Gi"}}}`,
			`parameters.sharing.mps.defaultPinnedDeviceMemoryLimit: Invalid value: "-1Gi": must be at least 1Mi: MPS counts pinned device memory in whole MiB`},
		{"absurd pinned memory", gpu + `{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":"1Ei"}}}`,
			`parameters.sharing.mps.defaultPinnedDeviceMemoryLimit: Invalid value: "1Ei": must be at most 1Pi`},
		{"pinned memory that is not a quantity", gpu + `{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":"20 GB"}}}`,
			`parameters.sharing.mps.defaultPinnedDeviceMemoryLimit: "20 GB" is not a quantity (quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'); write e.g. 20Gi or 512Mi`},
		{"per-device limit that is not a quantity", gpu + `{"strategy":"MPS","mps":{"perDevicePinnedMemoryLimits":{"1":"lots"}}}}`,
			`parameters.sharing.mps.perDevicePinnedMemoryLimits[1]: "lots" is not a quantity (quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'); write e.g. 20Gi or 512Mi`},
		{"per-device key that is a device name", gpu + `{"strategy":"MPS","mps":{"perDevicePinnedMemoryLimits":{"gpu-0":"1Gi"}}}}`,
			`parameters.sharing.mps.perDevicePinnedMemoryLimits[gpu-0]: Invalid value: "gpu-0": a key must be a CUDA device ordinal ("0") or a GPU UUID ("GPU-…"); MIG devices get a new UUID each time gpudra creates them, so key them by ordinal`},
		{"per-device key that is a MIG UUID", `{` + header + `,"kind":"MigConfig","sharing":{"strategy":"MPS","mps":{"perDevicePinnedMemoryLimits":{"MIG-4f5b8e5c-5a4b-5e0e-9a8f-2b1c9d5a3e77":"1Gi"}}}}`,
			`parameters.sharing.mps.perDevicePinnedMemoryLimits[MIG-4f5b8e5c-5a4b-5e0e-9a8f-2b1c9d5a3e77]: Invalid value: "MIG-4f5b8e5c-5a4b-5e0e-9a8f-2b1c9d5a3e77": a key must be a CUDA device ordinal ("0") or a GPU UUID ("GPU-…"); MIG devices get a new UUID each time gpudra creates them, so key them by ordinal`},
		{"per-device key with a leading zero", gpu + `{"strategy":"MPS","mps":{"perDevicePinnedMemoryLimits":{"01":"1Gi"}}}}`,
			`parameters.sharing.mps.perDevicePinnedMemoryLimits[01]: Invalid value: "01": a key must be a CUDA device ordinal ("0") or a GPU UUID ("GPU-…"); MIG devices get a new UUID each time gpudra creates them, so key them by ordinal`},
		{"misspelt mps field", gpu + `{"strategy":"MPS","mps":{"activeThreadPercentage":50}}}`,
			`parameters: unknown field "sharing.mps.activeThreadPercentage"`},
		{"NVIDIA's field names are not gpudra's", gpu + `{"strategy":"MPS","mpsConfig":{}}}`,
			`parameters: unknown field "sharing.mpsConfig"`},
		{"sharing is an object", gpu + `"MPS"}`,
			`parameters.sharing: wrong type: got string, want object`},
		{"every problem at once", gpu + `{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":0,"defaultPinnedDeviceMemoryLimit":"1Ki"}}}`,
			`[parameters.sharing.mps.defaultActiveThreadPercentage: Invalid value: 0: must be a percentage from 1 to 100, parameters.sharing.mps.defaultPinnedDeviceMemoryLimit: Invalid value: "1Ki": must be at least 1Mi: MPS counts pinned device memory in whole MiB]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode([]byte(tc.raw))
			if err == nil {
				t.Fatalf("Decode = %#v, want error %q", got, tc.wantErr)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("error:\n got: %s\nwant: %s", err, tc.wantErr)
			}
		})
	}
}

func TestTooManyPerDeviceLimits(t *testing.T) {
	limits := map[string]resource.Quantity{}
	for i := range MaxPerDeviceLimits + 1 {
		limits[string(rune('0'+i%10))+string(rune('0'+i/10))] = resource.MustParse("1Gi")
	}
	cfg := gpuWith(&Sharing{Strategy: MPSStrategy, MPS: &MPSConfig{PerDevicePinnedMemoryLimits: limits}})
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "parameters.sharing.mps.perDevicePinnedMemoryLimits: Too many: 65: must have at most 64 items") {
		t.Errorf("Validate = %v, want too many", err)
	}
}

func TestIntervalLevel(t *testing.T) {
	for want, i := range []TimeSliceInterval{DefaultTimeSlice, ShortTimeSlice, MediumTimeSlice, LongTimeSlice} {
		if got := i.Level(); got != want {
			t.Errorf("%s.Level() = %d, want %d (nvidia-smi compute-policy --set-timeslice)", i, got, want)
		}
	}
	if got := TimeSliceInterval("long").Level(); got != -1 {
		t.Errorf("Level of an unknown interval = %d, want -1", got)
	}
}

func TestSharingAccessors(t *testing.T) {
	var none *Sharing
	if none.IsMPS() || none.IsTimeSlicing() || none.Interval() != DefaultTimeSlice {
		t.Error("no sharing must be neither MPS nor time-slicing, at the Default interval")
	}
	long := &Sharing{Strategy: TimeSlicingStrategy, TimeSlicing: &TimeSlicingConfig{Interval: LongTimeSlice}}
	if !long.IsTimeSlicing() || long.Interval() != LongTimeSlice {
		t.Errorf("time-slicing Long: %v %v", long.IsTimeSlicing(), long.Interval())
	}
	if got := PinnedMemoryMiB(resource.MustParse("20Gi")); got != "20480M" {
		t.Errorf("PinnedMemoryMiB(20Gi) = %q", got)
	}
	if got := PinnedMemoryMiB(resource.MustParse("1500Ki")); got != "1M" {
		t.Errorf("PinnedMemoryMiB(1500Ki) = %q, want the remainder dropped", got)
	}
}

// TestDeepCopySharing: a copied config shares no memory with the original
// (the generated deep copy follows every pointer and map).
func TestDeepCopySharing(t *testing.T) {
	orig := gpuWith(&Sharing{Strategy: MPSStrategy, MPS: &MPSConfig{
		DefaultActiveThreadPercentage:  ptr.To[int32](50),
		DefaultPinnedDeviceMemoryLimit: quantity("1Gi"),
		PerDevicePinnedMemoryLimits:    map[string]resource.Quantity{"0": resource.MustParse("2Gi")},
	}})
	cp := orig.DeepCopy()
	if !reflect.DeepEqual(cp, orig) {
		t.Fatalf("copy = %#v, want %#v", cp, orig)
	}
	*cp.Sharing.MPS.DefaultActiveThreadPercentage = 10
	cp.Sharing.MPS.DefaultPinnedDeviceMemoryLimit.Add(resource.MustParse("1Gi"))
	cp.Sharing.MPS.PerDevicePinnedMemoryLimits["1"] = resource.MustParse("1Gi")
	cp.Sharing.Strategy = TimeSlicingStrategy
	if *orig.Sharing.MPS.DefaultActiveThreadPercentage != 50 || orig.Sharing.MPS.DefaultPinnedDeviceMemoryLimit.String() != "1Gi" ||
		len(orig.Sharing.MPS.PerDevicePinnedMemoryLimits) != 1 || orig.Sharing.Strategy != MPSStrategy {
		t.Errorf("mutating the copy changed the original: %#v", orig.Sharing.MPS)
	}
	mig := migWith(&Sharing{Strategy: TimeSlicingStrategy, TimeSlicing: &TimeSlicingConfig{Interval: DefaultTimeSlice}})
	mc := mig.DeepCopyObject().(*MigConfig)
	mc.Sharing.TimeSlicing.Interval = LongTimeSlice
	if mig.Sharing.TimeSlicing.Interval != DefaultTimeSlice {
		t.Error("MigConfig copy shares its timeSlicing")
	}
}

func TestSharingFromFlag(t *testing.T) {
	if s, err := SharingFromFlag("MPS"); err != nil || !s.IsMPS() || s.MPS == nil {
		t.Errorf("MPS: %#v, %v", s, err)
	}
	if s, err := SharingFromFlag("TimeSlicing"); err != nil || s.Interval() != DefaultTimeSlice || s.TimeSlicing == nil {
		t.Errorf("TimeSlicing: %#v, %v", s, err)
	}
	if s, err := SharingFromFlag("None"); err != nil || s != nil {
		t.Errorf("None: %#v, %v", s, err)
	}
	if _, err := SharingFromFlag("mps"); err == nil || err.Error() != `unknown sharing "mps": use MPS, TimeSlicing or None` {
		t.Errorf("mps: %v", err)
	}
}
