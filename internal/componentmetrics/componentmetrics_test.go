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

package componentmetrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpudra/gpudra/internal/version"
)

// TestHandler: /metrics serves the component's own metrics, its build
// info, and the Go, process and client-go metrics of a Kubernetes
// component (after client-go made a request).
func TestHandler(t *testing.T) {
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	defer apiserver.Close()
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: apiserver.URL})
	if _, err := client.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}

	own := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "gpudra_test_total", Help: "a test counter"})
	own.MustRegister(c)
	srv := httptest.NewServer(Handler("kubelet-plugin", own))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	info := version.Get()
	want := []string{
		"gpudra_test_total 0",
		`gpudra_build_info{component="kubelet-plugin",goversion="` + info.GoVersion + `",revision="` + info.Revision + `",version="` + info.Version + `"} 1`,
		"go_goroutines ",
		"rest_client_requests_total{",
	}
	if runtime.GOOS == "linux" {
		want = append(want, "process_resident_memory_bytes ")
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
}
