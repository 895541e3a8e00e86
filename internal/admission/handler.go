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
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/gpudra/gpudra/internal/errorlist"
)

// ValidatePath is where the API server sends AdmissionReviews; the chart's
// ValidatingWebhookConfiguration names it.
const ValidatePath = "/validate"

// Handler serves AdmissionReview v1 requests over HTTP, within Limits.
type Handler struct {
	Validator Validator
	// Observe, if set, is told the kind, the decision and how long it
	// took, for every request: Refused ones have no kind.
	Observe func(kind string, result Result, took time.Duration)

	limits Limits
	// budget holds the bytes of the reviews in flight (reviewCost).
	budget *semaphore.Weighted
}

// NewHandler returns a handler that judges reviews with v.
func NewHandler(v Validator, limits Limits) (*Handler, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	return &Handler{Validator: v, limits: limits, budget: semaphore.NewWeighted(limits.MaxInFlightBytes)}, nil
}

// incomingReview is what the handler reads of an AdmissionReview.
type incomingReview struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Request    *request `json:"request"`
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), h.limits.Timeout)
	defer cancel()
	logger := klog.FromContext(ctx)
	req, release, ref := h.receive(ctx, r)
	defer release()
	if ref != nil {
		if h.Observe != nil {
			h.Observe("", Refused, time.Since(start))
		}
		logger.V(2).Info("Admission request refused", "status", ref.status, "remote", r.RemoteAddr, "reason", ref.msg)
		http.Error(w, ref.msg, ref.status)
		return
	}
	h.respond(ctx, w, req)
}

// refusal is why a request gets no review: the HTTP status and message
// it is answered with.
type refusal struct {
	status int
	msg    string
}

func refuse(status int, format string, args ...any) *refusal {
	return &refusal{status: status, msg: fmt.Sprintf(format, args...)}
}

// receive checks that the request is a JSON POST of a size an API
// server's review can have, reserves room for it in the budget of reviews
// in flight, and decodes and checks the review. release gives the room
// back once the review is answered; it is always set.
func (h *Handler) receive(ctx context.Context, r *http.Request) (req *request, release func(), ref *refusal) {
	release = func() {}
	if r.Method != http.MethodPost {
		return nil, release, refuse(http.StatusMethodNotAllowed, "POST an admission.k8s.io/v1 AdmissionReview")
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return nil, release, refuse(http.StatusUnsupportedMediaType, "content type %q: want application/json", errorlist.Value(r.Header.Get("Content-Type")))
	}
	size := r.ContentLength
	if size > maxRequestBytes {
		return nil, release, refuse(http.StatusRequestEntityTooLarge, "request of %d bytes, larger than the %d a review from the API server can be", size, maxRequestBytes)
	}
	if size < 0 {
		size = maxRequestBytes // unknown: it may be as large as that
	}
	// Room for the body and the work before reading: what reviews in
	// flight hold together is bounded, however many arrive at once.
	cost := reviewCost(size)
	if cost > h.limits.MaxInFlightBytes/4 {
		if !h.budget.TryAcquire(cost) {
			return nil, release, refuse(http.StatusTooManyRequests, "too many reviews in flight: no room for a review of %d bytes now", size)
		}
	} else if err := h.budget.Acquire(ctx, cost); err != nil {
		return nil, release, refuse(http.StatusTooManyRequests, "too many reviews in flight: no room within %v", h.limits.Timeout)
	}
	release = func() { h.budget.Release(cost) }
	req, ref = decodeReview(r, size)
	return req, release, ref
}

// decodeReview reads the body (at most size bytes) and decodes the
// AdmissionReview in it, with a request that passes its checks.
func decodeReview(r *http.Request, size int64) (*request, *refusal) {
	body, err := readBody(r.Body, size, r.ContentLength >= 0)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "read request: %v", err)
	}
	if len(body) > maxRequestBytes {
		return nil, refuse(http.StatusRequestEntityTooLarge, "request larger than %d bytes", maxRequestBytes)
	}
	var rev incomingReview
	if err := json.Unmarshal(body, &rev); err != nil {
		return nil, refuse(http.StatusBadRequest, "decode AdmissionReview: %v", err)
	}
	if rev.APIVersion != admissionv1.SchemeGroupVersion.String() || rev.Kind != "AdmissionReview" || rev.Request == nil {
		return nil, refuse(http.StatusBadRequest, "got %s %s: want an %s AdmissionReview with a request",
			errorlist.Value(rev.APIVersion), errorlist.Value(rev.Kind), admissionv1.SchemeGroupVersion)
	}
	if err := rev.Request.check(); err != nil {
		return nil, refuse(http.StatusBadRequest, "%v", err)
	}
	return rev.Request, nil
}

// respond reviews the request, logs and observes the result, and writes
// the AdmissionReview with the response.
func (h *Handler) respond(ctx context.Context, w http.ResponseWriter, req *request) {
	logger := klog.FromContext(ctx)
	judged := time.Now()
	resp, result := h.Validator.review(ctx, req)
	took := time.Since(judged)
	if h.Observe != nil {
		h.Observe(req.Kind.Kind, result, took)
	}
	logger.V(2).Info("Admission review", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name,
		"operation", req.Operation, "result", result, "took", took)
	if result != Allowed {
		logger.V(1).Info("Admission review not allowed", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name,
			"user", errorlist.Value(req.UserInfo.Username), "result", result, "message", resp.Result.Message)
	}

	out, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: resp,
	})
	if err != nil {
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(out); err != nil {
		logger.V(2).Info("Writing admission response failed", "err", err)
	}
}

// readBody reads a body of size bytes when known, or up to one byte past
// maxRequestBytes when not.
func readBody(body io.Reader, size int64, known bool) ([]byte, error) {
	if !known {
		return io.ReadAll(io.LimitReader(body, maxRequestBytes+1))
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(body, buf); err != nil {
		return nil, err
	}
	return buf, nil
}
