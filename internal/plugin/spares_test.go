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

package plugin

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpudra/gpudra/internal/backend"
	"github.com/gpudra/gpudra/internal/slicebuilder"
	"github.com/gpudra/gpudra/internal/sparesmap"
)

// Fleet mode reads a ConfigMap of the plugin's namespace: Start refuses
// to run without the namespace or the ConfigMap's name, and says which
// flag is missing (and releases the backend, as on every failed start).
func TestStartFleetNeedsNamespace(t *testing.T) {
	for _, tc := range []struct {
		namespace, configMap, want string
	}{
		{"", "gpudra-mig-spares", "--namespace"},
		{"gpudra", "", "--mig-spares-configmap"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			cfg := startConfig(t)
			cfg.SpareGPUs, cfg.Namespace, cfg.SparesConfigMap = slicebuilder.SpareGPUs{Fleet: true}, tc.namespace, tc.configMap
			d, err := Start(ctx, cfg)
			if err == nil {
				d.Stop()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start: %v, want an error naming %s", err, tc.want)
			}
			if err := cfg.Backend.Close(); !errors.Is(err, backend.ErrClosed) {
				t.Errorf("the backend was still open after Start failed (Close: %v)", err)
			}
		})
	}
}

// TestSparesChangedReadsTheOneFormat: the plugin reads its node's entry
// with sparesmap.Decode, the controller's parser (spaces around the
// number ignored on both sides), and logs a bad value cut short.
func TestSparesChangedReadsTheOneFormat(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	f := &fleetSpares{cfg: Config{NodeName: "node-1", Namespace: "gpudra", SparesConfigMap: "spares"}, republish: func() {}}
	cm := func(v string) *v1.ConfigMap {
		return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gpudra", Name: "spares"}, Data: map[string]string{"node-1": v}}
	}
	for _, tc := range []struct {
		value string
		want  int
	}{{" 2\n", 2}, {"1", 1}, {strings.Repeat("9", 64<<10), 0}, {"\t1 ", 1}} {
		f.changed(ctx, cm(tc.value), false)
		controller, _ := sparesmap.Decode(tc.value)
		if got := f.assignedSpares(); got != tc.want || got != controller {
			t.Errorf("%.20q: the plugin reads %d, the controller %d; want %d", tc.value, got, controller, tc.want)
		}
	}
	for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
		if e.Err != nil && len(e.Err.Error()) > 160 {
			t.Errorf("log %q: an error of %d bytes, want it short", e.Message, len(e.Err.Error()))
		}
		for _, l := range [][]any{e.WithKVList, e.ParameterKVList} {
			for i := 1; i < len(l); i += 2 {
				if s, ok := l[i].(string); ok && len(s) > 100 {
					t.Errorf("log %q: a value of %d bytes, want it cut short", e.Message, len(s))
				}
			}
		}
	}
}
