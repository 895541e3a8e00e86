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
	"bytes"
	"reflect"
	"strings"
	"testing"

	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

const header = `"apiVersion":"resource.gpudra.io/v1alpha1"`

func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    Config
		wantEnv string
	}{
		{
			name:    "GpuConfig without capabilities gets the toolkit default",
			raw:     `{` + header + `,"kind":"GpuConfig"}`,
			want:    &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"compute", "utility"}},
			wantEnv: "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
		},
		{
			name:    "an empty list means the default too",
			raw:     `{` + header + `,"kind":"GpuConfig","driverCapabilities":[]}`,
			want:    &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"compute", "utility"}},
			wantEnv: "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
		},
		{
			name:    "explicit capabilities are kept in the user's order",
			raw:     `{` + header + `,"kind":"GpuConfig","driverCapabilities":["video","compute","graphics"]}`,
			want:    &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"video", "compute", "graphics"}},
			wantEnv: "NVIDIA_DRIVER_CAPABILITIES=video,compute,graphics",
		},
		{
			name: "every supported capability",
			raw: `{` + header + `,"kind":"GpuConfig","driverCapabilities":` +
				`["compute","compat32","graphics","utility","video","display","all"]}`,
			want: &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{
				"compute", "compat32", "graphics", "utility", "video", "display", "all"}},
			wantEnv: "NVIDIA_DRIVER_CAPABILITIES=compute,compat32,graphics,utility,video,display,all",
		},
		{
			name:    "MigConfig",
			raw:     `{` + header + `,"kind":"MigConfig","driverCapabilities":["all"]}`,
			want:    &MigConfig{TypeMeta: migTypeMeta, DriverCapabilities: []string{"all"}},
			wantEnv: "NVIDIA_DRIVER_CAPABILITIES=all",
		},
		{
			name:    "MigConfig defaults like GpuConfig",
			raw:     " \n{" + header + `,"kind":"MigConfig"}` + "\n",
			want:    &MigConfig{TypeMeta: migTypeMeta, DriverCapabilities: []string{"compute", "utility"}},
			wantEnv: "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
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
			if env := capabilitiesEnv(t, got); env != tc.wantEnv {
				t.Errorf("env = %q, want %q", env, tc.wantEnv)
			}
		})
	}
}

// TestDecodeRejects pins the exact messages: they are what a user reads in a
// failed pod's events, so a change to them is a change to the product.
func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantErr string
	}{
		{
			name:    "unsupported capability",
			raw:     `{` + header + `,"kind":"GpuConfig","driverCapabilities":["compute","cuda"]}`,
			wantErr: `parameters.driverCapabilities[1]: Unsupported value: "cuda": supported values: "compute", "compat32", "graphics", "utility", "video", "display", "all"`,
		},
		{
			name:    "capabilities are case-sensitive, as in the toolkit",
			raw:     `{` + header + `,"kind":"MigConfig","driverCapabilities":["Compute"]}`,
			wantErr: `parameters.driverCapabilities[0]: Unsupported value: "Compute": supported values: "compute", "compat32", "graphics", "utility", "video", "display", "all"`,
		},
		{
			name:    "capability listed twice",
			raw:     `{` + header + `,"kind":"GpuConfig","driverCapabilities":["video","compute","video"]}`,
			wantErr: `parameters.driverCapabilities[2]: Duplicate value: "video"`,
		},
		{
			name:    "unknown field",
			raw:     `{` + header + `,"kind":"GpuConfig","sharng":{"strategy":"MPS"}}`,
			wantErr: `parameters: unknown field "sharng"`,
		},
		{
			name:    "field names are case-sensitive",
			raw:     `{` + header + `,"kind":"GpuConfig","DriverCapabilities":["compute"]}`,
			wantErr: `parameters: unknown field "DriverCapabilities"`,
		},
		{
			name:    "duplicate field",
			raw:     `{` + header + `,"kind":"GpuConfig","driverCapabilities":["compute"],"driverCapabilities":["video"]}`,
			wantErr: `parameters: duplicate field "driverCapabilities"`,
		},
		{
			name:    "every problem is reported at once",
			raw:     `{` + header + `,"kind":"MigConfig","profile":"1g.10gb","driverCapabilities":["cuda"]}`,
			wantErr: `[parameters: unknown field "profile", parameters.driverCapabilities[0]: Unsupported value: "cuda": supported values: "compute", "compat32", "graphics", "utility", "video", "display", "all"]`,
		},
		{
			name:    "a string where a list belongs",
			raw:     `{` + header + `,"kind":"GpuConfig","driverCapabilities":"compute,utility"}`,
			wantErr: `parameters.driverCapabilities: wrong type: got string, want list of strings`,
		},
		{
			name:    "a number in the list",
			raw:     `{` + header + `,"kind":"GpuConfig","driverCapabilities":[1]}`,
			wantErr: `parameters.driverCapabilities: wrong type: got number, want string`,
		},
		{
			name:    "unknown kind",
			raw:     `{` + header + `,"kind":"GpuConfg"}`,
			wantErr: `parameters.kind: "GpuConfg" is not known in resource.gpudra.io/v1alpha1; known kinds: GpuConfig, MigConfig`,
		},
		{
			name:    "missing kind",
			raw:     `{` + header + `}`,
			wantErr: `parameters.kind: Required value: known kinds: GpuConfig, MigConfig`,
		},
		{
			name:    "missing apiVersion",
			raw:     `{"kind":"GpuConfig"}`,
			wantErr: `parameters.apiVersion: Required value: must be resource.gpudra.io/v1alpha1`,
		},
		{
			name:    "another driver's API",
			raw:     `{"apiVersion":"gpu.resource.nvidia.com/v1beta1","kind":"GpuConfig"}`,
			wantErr: `parameters.apiVersion: Unsupported value: "gpu.resource.nvidia.com/v1beta1": supported values: "resource.gpudra.io/v1alpha1"`,
		},
		{
			name:    "apiVersion of the wrong type",
			raw:     `{"apiVersion":1,"kind":"GpuConfig"}`,
			wantErr: `parameters.apiVersion: wrong type: got number, want string`,
		},
		{
			name:    "not an object",
			raw:     `["compute"]`,
			wantErr: `parameters: wrong type: got array, want object`,
		},
		{
			name:    "truncated JSON",
			raw:     `{` + header + `,"kind":`,
			wantErr: `parameters: invalid JSON at byte 51: unexpected end of JSON input`,
		},
		{
			name:    "empty",
			raw:     "  ",
			wantErr: `parameters: Required value: must be a resource.gpudra.io/v1alpha1 object with apiVersion and kind`,
		},
		{
			name:    "null",
			raw:     "null",
			wantErr: `parameters.apiVersion: Required value: must be resource.gpudra.io/v1alpha1`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode([]byte(tc.raw))
			if err == nil {
				t.Fatalf("Decode = %#v, want error %q", got, tc.wantErr)
			}
			if got != nil {
				t.Errorf("Decode returned a config %#v together with an error", got)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("error:\n got: %s\nwant: %s", err, tc.wantErr)
			}
		})
	}
}

func TestDecodeNonStrict(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    Config
		wantErr string
	}{
		{
			name: "fields from a newer gpudra are ignored",
			raw:  `{` + header + `,"kind":"MigConfig","driverCapabilities":["video"],"placement":{"start":3}}`,
			want: &MigConfig{TypeMeta: migTypeMeta, DriverCapabilities: []string{"video"}},
		},
		{
			name: "values a newer gpudra accepted are kept, not re-validated",
			raw:  `{` + header + `,"kind":"GpuConfig","driverCapabilities":["compute","ngx"]}`,
			want: &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"compute", "ngx"}},
		},
		{
			name: "defaults are applied",
			raw:  `{` + header + `,"kind":"GpuConfig"}`,
			want: &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"compute", "utility"}},
		},
		{
			name:    "an unknown kind is still an error",
			raw:     `{` + header + `,"kind":"MpsConfig"}`,
			wantErr: `parameters.kind: "MpsConfig" is not known in resource.gpudra.io/v1alpha1; known kinds: GpuConfig, MigConfig`,
		},
		{
			name:    "a wrong type is still an error",
			raw:     `{` + header + `,"kind":"GpuConfig","driverCapabilities":"all"}`,
			wantErr: `parameters.driverCapabilities: wrong type: got string, want list of strings`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeNonStrict([]byte(tc.raw))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("DecodeNonStrict error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeNonStrict: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("DecodeNonStrict = %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestEncodeDecodeRoundTrip checks that what gpudra writes (e.g. into its
// checkpoint) reads back strictly as the same config: the JSON names in the
// struct tags and the decoder agree.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	encoder := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{})
	for _, cfg := range []Config{
		&GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"graphics", "display"}},
		&MigConfig{TypeMeta: migTypeMeta, DriverCapabilities: []string{"compute"}},
	} {
		t.Run(cfg.GetObjectKind().GroupVersionKind().Kind, func(t *testing.T) {
			var buf bytes.Buffer
			if err := encoder.Encode(cfg, &buf); err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := Decode(buf.Bytes())
			if err != nil {
				t.Fatalf("Decode(%s): %v", buf.String(), err)
			}
			if !reflect.DeepEqual(got, cfg) {
				t.Errorf("round trip of %s = %#v, want %#v", strings.TrimSpace(buf.String()), got, cfg)
			}
		})
	}
}

// capabilitiesEnv reaches the kind-specific method the plugin uses.
func capabilitiesEnv(t *testing.T, cfg Config) string {
	t.Helper()
	switch c := cfg.(type) {
	case *GpuConfig:
		return c.DriverCapabilitiesEnv()
	case *MigConfig:
		return c.DriverCapabilitiesEnv()
	}
	t.Fatalf("unexpected config type %T", cfg)
	return ""
}
