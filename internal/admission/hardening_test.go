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

package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	runtimemetrics "runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
)

// What a pod that reaches the webhook's Service can send, and what the
// webhook must survive: slow uploads, reviews as large as a request may
// be, reviews full of bad values, many of them at once. The API server
// never sends more than its own limits let through (a request body of
// 3 MiB, at most 32 configs of at most 10 KiB in an object), so a review
// past them is refused unread.

// badConfig is a config of the driver at the API server's size limit
// with an unsupported capability in every entry.
func badConfig() string {
	prefix := `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","driverCapabilities":[`
	var b strings.Builder
	b.WriteString(prefix)
	for n := 0; b.Len()+len(`"x",`)+len(`]}`) <= resourceapi.OpaqueParametersMaxLength; n++ {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"x"`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// claimWith is a claim with n copies of one config of the driver.
func claimWith(n int, params string) *resourceapi.ResourceClaim {
	var configs []resourceapi.DeviceClaimConfiguration
	for range n {
		configs = append(configs, opaque(driver, params))
	}
	return claim(configs...)
}

// serve calls the handler in-process and returns the response and the
// bytes it allocated doing so.
func serve(t *testing.T, h http.Handler, body []byte) (*httptest.ResponseRecorder, uint64) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, ValidatePath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	return rec, after.TotalAlloc - before.TotalAlloc
}

// TestWebhookBoundsWorkPerReview: the worst review the API server can
// send (32 configs at its size limit, every value bad) gets a denial of
// bounded size, cheaply; a review of 7 MiB of bad values, which only
// something else can send, is refused unread.
func TestWebhookBoundsWorkPerReview(t *testing.T) {
	h := newHandler(Validator{DriverName: driver}, DefaultLimits())
	bad := badConfig()

	worst := review(t, admissionv1.Create, claimWith(resourceapi.DeviceConfigMaxSize, bad), nil)
	rec, alloc := serve(t, h, worst)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != http.StatusOK || err != nil || out.Response == nil {
		t.Fatalf("HTTP %d %v: %.300s", rec.Code, err, rec.Body.String())
	}
	if out.Response.Allowed {
		t.Fatal("32 bad configs allowed")
	}
	msg, causes := out.Response.Result.Message, out.Response.Result.Details.Causes
	t.Logf("32 configs of %d bytes: %d causes, %d-byte message, %d MB allocated", len(bad), len(causes), len(msg), alloc>>20)
	if len(causes) > maxCauses+1 || len(msg) > 16<<10 {
		t.Errorf("%d causes and a %d-byte message, want at most %d causes and 16 KiB", len(causes), len(msg), maxCauses+1)
	}
	if last := causes[len(causes)-1]; !strings.Contains(last.Message, "more errors") {
		t.Errorf("the last cause does not say how many more there are: %+v", last)
	}
	if alloc > 256<<20 {
		t.Errorf("answering it allocated %d MB, want at most 256", alloc>>20)
	}

	// 700 such configs: 7 MiB, far past what the API server lets through.
	huge := review(t, admissionv1.Create, claimWith(700, bad), nil)
	start := time.Now()
	rec, alloc = serve(t, h, huge)
	took := time.Since(start)
	t.Logf("%d-byte review: HTTP %d in %v, %d MB allocated", len(huge), rec.Code, took, alloc>>20)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "more than 32") {
		t.Errorf("HTTP %d %.300q, want 400 saying the object has more than 32 configs", rec.Code, rec.Body.String())
	}
	if alloc > 4*uint64(len(huge)) {
		t.Errorf("refusing it allocated %d MB, %.1f times its size; want at most 4 times", alloc>>20, float64(alloc)/float64(len(huge)))
	}
}

// TestWebhookRefusesWhatTheAPIServerNeverSends: reviews past the API
// server's limits are answered 400 without being judged.
func TestWebhookRefusesWhatTheAPIServerNeverSends(t *testing.T) {
	h := newHandler(Validator{DriverName: driver}, DefaultLimits())
	big := `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","pad":"` + strings.Repeat("x", maxParametersBytes) + `"}`
	withRequest := func(edit func(*admissionv1.AdmissionRequest)) []byte {
		var r admissionv1.AdmissionReview
		if err := json.Unmarshal(review(t, admissionv1.Create, claim(opaque(driver, goodGpu)), nil), &r); err != nil {
			t.Fatal(err)
		}
		edit(r.Request)
		return mustJSON(t, &r)
	}
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"33 configs", review(t, admissionv1.Create, claimWith(resourceapi.DeviceConfigMaxSize+1, goodGpu), nil), "more than 32"},
		{"33 configs in the old object", review(t, admissionv1.Update, claim(), claimWith(resourceapi.DeviceConfigMaxSize+1, goodGpu)), "more than 32"},
		{"a config larger than a stored one can be in a review", review(t, admissionv1.Create, claim(opaque(driver, big)), nil), "61440"},
		{"another driver's", review(t, admissionv1.Create, claim(opaque("gpu.example.com", big)), nil), "61440"},
		{"a long UID", withRequest(func(r *admissionv1.AdmissionRequest) { r.UID = types.UID(strings.Repeat("u", 1000)) }), "uid"},
		{"a long name", withRequest(func(r *admissionv1.AdmissionRequest) { r.Name = strings.Repeat("n", 1000) }), "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, _ := serve(t, h, tc.body)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("HTTP %d %.300q, want 400 mentioning %q", rec.Code, rec.Body.String(), tc.want)
			}
			if len(rec.Body.String()) > 1024 {
				t.Errorf("a %d-byte answer", len(rec.Body.String()))
			}
		})
	}
	// At the limits, it is judged: 32 configs, and a config of 10 KiB
	// that the API server's JSON encoder escapes to six times its size.
	escaped := `{"apiVersion":"resource.gpudra.io/v1alpha1","kind":"GpuConfig","x":"` + strings.Repeat("<", resourceapi.OpaqueParametersMaxLength-80) + `"}`
	for name, body := range map[string][]byte{
		"32 configs":           review(t, admissionv1.Create, claimWith(resourceapi.DeviceConfigMaxSize, goodGpu), nil),
		"a 10 KiB config of <": review(t, admissionv1.Create, claim(opaque(driver, escaped)), nil),
	} {
		rec, _ := serve(t, h, body)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"uid":"req-c"`) {
			t.Errorf("%s: HTTP %d %.300s", name, rec.Code, rec.Body.String())
		}
	}
}

// slowClient opens an HTTP/1.1 connection to the webhook, sends a
// request's headers and then the body a kilobyte at a time; it returns
// when the server closes the connection or after max.
func slowUpload(t *testing.T, addr string, roots *tls.Config, max time.Duration) (time.Duration, error) {
	cfg := roots.Clone()
	cfg.NextProtos = []string{"http/1.1"}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close() }()
	start := time.Now()
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", ValidatePath, 7<<20); err != nil {
		return 0, err
	}
	chunk := bytes.Repeat([]byte(" "), 1024)
	for time.Since(start) < max {
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := conn.Write(chunk); err != nil {
			return time.Since(start), nil // the server hung up
		}
		_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		var b [1]byte
		if _, err := conn.Read(b[:]); err != nil && !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
			return time.Since(start), nil
		}
	}
	return time.Since(start), fmt.Errorf("the connection was still open after %v", max)
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// TestWebhookCutsSlowUploads: a client that sends its body slowly is cut
// off once the review's time is up, over HTTP/1.1 and HTTP/2 alike.
// (Before: 20 slow uploads held their connections, and 167 MiB, for as
// long as they liked.)
func TestWebhookCutsSlowUploads(t *testing.T) {
	limits := DefaultLimits()
	limits.Timeout = time.Second
	w := startWebhookWith(t, nil, limits)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			took, err := slowUpload(t, w.addr, w.tls, 5*time.Second)
			if err == nil && took > 3*time.Second {
				err = fmt.Errorf("cut after %v, want about %v", took, limits.Timeout)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	// HTTP/2: a body that trickles in.
	pr, pw := io.Pipe()
	go func() {
		defer func() { _ = pw.Close() }()
		for range 50 {
			if _, err := pw.Write([]byte(" ")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	start := time.Now()
	r, err := w.client.Post(w.url, "application/json", pr)
	if err == nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
		if r.ProtoMajor != 2 {
			t.Errorf("the client spoke %s, want HTTP/2", r.Proto)
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("an HTTP/2 slow upload went on for %v (%v)", took, err)
	}
}

// liveHeap is the heap after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestWebhookBoundsConcurrentMemory: hostile reviews at once, large and
// small, cannot make a replica hold more than its in-flight budget and
// the work each review does: it cannot be OOM-killed under the chart's
// limit. (Before: one 7 MiB review of bad values took 900 MiB of heap;
// two OOM-killed a replica under a 512 Mi limit.)
func TestWebhookBoundsConcurrentMemory(t *testing.T) {
	limits := DefaultLimits()
	// What this test bounds is memory, not time (TestWebhookCutsSlowUploads
	// bounds time): on a loaded machine (make test runs packages side by
	// side) the last of the 64 reviews that wait their turn for the budget
	// can pass a 10 s deadline, and be refused for time, not for memory.
	limits.Timeout = 2 * time.Minute
	w := startWebhookWith(t, nil, limits)
	bad := badConfig()
	// 7 MiB of bad configs, and the worst the API server can send.
	largeBody := review(t, admissionv1.Create, claimWith(700, bad), nil)
	smallBody := review(t, admissionv1.Create, claimWith(resourceapi.DeviceConfigMaxSize, bad), nil)
	if len(largeBody) > maxRequestBytes {
		t.Fatalf("the large review is %d bytes, past the %d the API server can send", len(largeBody), maxRequestBytes)
	}

	base := liveHeap()
	var peak int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		s := []runtimemetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			runtimemetrics.Read(s)
			peak = max(peak, int64(s[0].Value.Uint64()))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	codes := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Each on a connection of its own, as pods that are not the API
	// server would send them.
	send := func(body []byte) {
		r, err := w.newClient().Post(w.url, "application/json", bytes.NewReader(body))
		code := 0
		if err == nil {
			_, _ = io.Copy(io.Discard, r.Body)
			_ = r.Body.Close()
			code = r.StatusCode
		}
		mu.Lock()
		codes[code]++
		mu.Unlock()
	}
	for range 16 {
		wg.Go(func() { send(largeBody) })
	}
	for range 64 {
		wg.Go(func() { send(smallBody) })
	}
	// Meanwhile, on its own connection, the API server's reviews are
	// answered.
	valid := review(t, admissionv1.Create, claim(opaque(driver, goodGpu)), nil)
	for range 10 {
		start := time.Now()
		resp := post(t, w.client, w.url, valid)
		if took := time.Since(start); !resp.Allowed || took > limits.Timeout {
			t.Errorf("a valid review during the storm: allowed=%v after %v", resp.Allowed, took)
		}
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	used := peak - base
	t.Logf("16 reviews of %d bytes and 64 of %d: peak heap +%d MiB, budget %d MiB; answers %v", len(largeBody), len(smallBody), used>>20, limits.MaxInFlightBytes>>20, codes)
	if bound := 2*limits.MaxInFlightBytes + 32<<20; used > bound {
		t.Errorf("the reviews took %d MiB of heap at once, want at most %d", used>>20, bound>>20)
	}
	// The 64 the API server could have sent are judged; the 16 it could
	// not are refused, unread (429: no room for 7 MiB now) or read and
	// refused (400).
	if codes[http.StatusOK] != 64 || codes[http.StatusBadRequest]+codes[http.StatusTooManyRequests] != 16 {
		t.Errorf("answers by HTTP status (0: no answer): %v; want 64 judged (200) and 16 refused (400, 429)", codes)
	}
	// Afterwards, a review is answered as ever.
	if resp := post(t, w.client, w.url, review(t, admissionv1.Create, claim(opaque(driver, goodGpu)), nil)); !resp.Allowed {
		t.Errorf("a valid config after the storm: %+v", resp.Result)
	}
}
