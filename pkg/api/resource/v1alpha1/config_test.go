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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	gpuTypeMeta = metav1.TypeMeta{APIVersion: "resource.gpudra.io/v1alpha1", Kind: "GpuConfig"}
	migTypeMeta = metav1.TypeMeta{APIVersion: "resource.gpudra.io/v1alpha1", Kind: "MigConfig"}
)

// TestDefaultDoesNotShareTheDefault guards against every defaulted config
// aliasing DefaultDriverCapabilities: one claim's edit would leak into every
// other claim.
func TestDefaultDoesNotShareTheDefault(t *testing.T) {
	for _, cfg := range []Config{&GpuConfig{}, &MigConfig{}} {
		cfg.Default()
		caps := reflect.ValueOf(cfg).Elem().FieldByName("DriverCapabilities").Interface().([]string)
		caps[0] = "graphics"
		if DefaultDriverCapabilities[0] != "compute" {
			t.Fatalf("%T.Default aliases DefaultDriverCapabilities", cfg)
		}
	}
}

func TestDefaultKeepsUserValues(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want Config
	}{
		{"gpu", &GpuConfig{DriverCapabilities: []string{"video"}}, &GpuConfig{DriverCapabilities: []string{"video"}}},
		{"mig", &MigConfig{DriverCapabilities: []string{"video"}}, &MigConfig{DriverCapabilities: []string{"video"}}},
		{"gpu twice", defaulted(&GpuConfig{}), &GpuConfig{DriverCapabilities: []string{"compute", "utility"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Default()
			if !reflect.DeepEqual(tc.cfg, tc.want) {
				t.Errorf("Default = %#v, want %#v", tc.cfg, tc.want)
			}
		})
	}
}

func defaulted(c Config) Config { c.Default(); return c }

func TestDeepCopy(t *testing.T) {
	tests := []struct {
		name   string
		orig   Config
		mutate func(runtime.Object)
	}{
		{
			name:   "GpuConfig",
			orig:   &GpuConfig{TypeMeta: gpuTypeMeta, DriverCapabilities: []string{"compute"}},
			mutate: func(o runtime.Object) { o.(*GpuConfig).DriverCapabilities[0] = "video" },
		},
		{
			name:   "MigConfig",
			orig:   &MigConfig{TypeMeta: migTypeMeta, DriverCapabilities: []string{"compute"}},
			mutate: func(o runtime.Object) { o.(*MigConfig).DriverCapabilities[0] = "video" },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cp := tc.orig.DeepCopyObject()
			if !reflect.DeepEqual(cp, tc.orig) {
				t.Fatalf("copy = %#v, want %#v", cp, tc.orig)
			}
			tc.mutate(cp)
			if reflect.DeepEqual(cp, tc.orig) {
				t.Fatalf("mutating the copy changed the original: %#v", tc.orig)
			}
		})
	}
}

func TestDeepCopyKeepsNilAndEmpty(t *testing.T) {
	if got := (&GpuConfig{}).DeepCopy().DriverCapabilities; got != nil {
		t.Errorf("nil capabilities copied as %#v", got)
	}
	if got := (&MigConfig{DriverCapabilities: []string{}}).DeepCopy().DriverCapabilities; got == nil || len(got) != 0 {
		t.Errorf("empty capabilities copied as %#v", got)
	}
	if got := (*GpuConfig)(nil).DeepCopy(); got != nil {
		t.Errorf("nil GpuConfig copied as %#v", got)
	}
	if got := (*MigConfig)(nil).DeepCopyObject(); got != nil {
		t.Errorf("nil MigConfig copied as %#v, want a nil interface", got)
	}
}

func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatalf("AddToScheme: %v", err)
	}
	for kind, want := range map[string]runtime.Object{"GpuConfig": &GpuConfig{}, "MigConfig": &MigConfig{}} {
		gvk := schema.GroupVersionKind{Group: "resource.gpudra.io", Version: "v1alpha1", Kind: kind}
		obj, err := s.New(gvk)
		if err != nil {
			t.Fatalf("scheme.New(%v): %v", gvk, err)
		}
		if reflect.TypeOf(obj) != reflect.TypeOf(want) {
			t.Errorf("scheme.New(%v) = %T, want %T", gvk, obj, want)
		}
	}
}

// TestNewConfigIsWhatAnEmptyConfigDecodesTo: a claim without config and a
// claim with an empty config of the same kind must behave the same.
func TestNewConfigIsWhatAnEmptyConfigDecodesTo(t *testing.T) {
	tests := []struct {
		raw  string
		want Config
	}{
		{raw: `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig"}`, want: NewGpuConfig()},
		{raw: `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"MigConfig"}`, want: NewMigConfig()},
	}
	for _, tc := range tests {
		got, err := Decode([]byte(tc.raw))
		if err != nil {
			t.Fatalf("Decode(%s): %v", tc.raw, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Decode(%s) = %#v, want %#v", tc.raw, got, tc.want)
		}
		if err := tc.want.Validate(); err != nil {
			t.Errorf("%T from its constructor does not validate: %v", tc.want, err)
		}
	}
}
