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
	"testing"
)

// TestMergeParameters pins the precedence of configs that apply to one
// device: later (the claim's) fields replace earlier (the DeviceClass's)
// fields of the same name; fields the later one leaves out are kept; a
// config of another kind replaces everything.
func TestMergeParameters(t *testing.T) {
	mpsClass := `{` + header + `,"kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":25}}}`
	tests := []struct {
		name string
		raws []string
		want Config
	}{
		{
			name: "the claim picks capabilities, the class's sharing stays",
			raws: []string{mpsClass, `{` + header + `,"kind":"GpuConfig","driverCapabilities":["compute","video"]}`},
			want: &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"compute", "video"},
				Sharing: &Sharing{Strategy: MPSStrategy, MPS: &MPSConfig{DefaultActiveThreadPercentage: ptrInt32(25)}}},
		},
		{
			name: "the claim's sharing replaces the class's as a whole",
			raws: []string{mpsClass, `{` + header + `,"kind":"GpuConfig","sharing":{"strategy":"MPS"}}`},
			want: &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"compute", "utility"},
				Sharing: &Sharing{Strategy: MPSStrategy, MPS: &MPSConfig{}}},
		},
		{
			name: "a claim may switch the strategy",
			raws: []string{mpsClass, `{` + header + `,"kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`},
			want: &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"compute", "utility"},
				Sharing: &Sharing{Strategy: TimeSlicingStrategy, TimeSlicing: &TimeSlicingConfig{Interval: DefaultTimeSlice}}},
		},
		{
			name: "another kind replaces everything",
			raws: []string{mpsClass, `{` + header + `,"kind":"MigConfig","driverCapabilities":["all"]}`},
			want: &MigConfig{TypeMeta: migTypeMeta, DriverCapabilities: []string{"all"}},
		},
		{
			name: "three layers, the last one wins field by field",
			raws: []string{
				`{` + header + `,"kind":"GpuConfig","driverCapabilities":["video"]}`,
				mpsClass,
				`{` + header + `,"kind":"GpuConfig","driverCapabilities":["graphics"]}`,
			},
			want: &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"graphics"},
				Sharing: &Sharing{Strategy: MPSStrategy, MPS: &MPSConfig{DefaultActiveThreadPercentage: ptrInt32(25)}}},
		},
		{
			name: "one config is taken as it is",
			raws: []string{mpsClass},
			want: &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"compute", "utility"},
				Sharing: &Sharing{Strategy: MPSStrategy, MPS: &MPSConfig{DefaultActiveThreadPercentage: ptrInt32(25)}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var raws [][]byte
			for _, r := range tc.raws {
				raws = append(raws, []byte(r))
			}
			merged, err := MergeParameters(raws...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(merged)
			if err != nil {
				t.Fatalf("Decode(%s): %v", merged, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("merged %s\n got %#v\nwant %#v", merged, got, tc.want)
			}
		})
	}
	if out, err := MergeParameters(); out != nil || err != nil {
		t.Errorf("MergeParameters() = %q, %v; want nothing", out, err)
	}
}

func ptrInt32(i int32) *int32 { return &i }
