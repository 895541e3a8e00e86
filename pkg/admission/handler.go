package admission

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2"
)

// ValidatePath is where the API server sends AdmissionReviews; the chart's
// ValidatingWebhookConfiguration names it.
const ValidatePath = "/validate"

// maxRequestBytes bounds a request body: the API server limits objects to
// 3 MiB, and a review carries the object and, on UPDATE, the old one.
const maxRequestBytes = 7 << 20

// Handler serves AdmissionReview v1 requests over HTTP.
type Handler struct {
	Validator Validator
	// Observe, if set, is told the kind, the decision and how long it
	// took, for every review.
	Observe func(kind string, result Result, took time.Duration)
}

func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	logger := klog.FromContext(r.Context())
	if r.Method != http.MethodPost {
		http.Error(w, "POST an admission.k8s.io/v1 AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		http.Error(w, fmt.Sprintf("content type %q: want application/json", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	if err != nil {
		http.Error(w, "read request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxRequestBytes {
		http.Error(w, fmt.Sprintf("request larger than %d bytes", maxRequestBytes), http.StatusRequestEntityTooLarge)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(w, "decode AdmissionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" || review.Request == nil {
		http.Error(w, fmt.Sprintf("got %s %s: want an %s AdmissionReview with a request", review.APIVersion, review.Kind, admissionv1.SchemeGroupVersion), http.StatusBadRequest)
		return
	}

	start := time.Now()
	resp, result := h.Validator.Review(review.Request)
	took := time.Since(start)
	if h.Observe != nil {
		h.Observe(review.Request.Kind.Kind, result, took)
	}
	req := review.Request
	logger.V(2).Info("Admission review", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name,
		"operation", req.Operation, "result", result, "took", took)
	if result != Allowed {
		logger.V(1).Info("Admission review not allowed", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name,
			"user", req.UserInfo.Username, "result", result, "message", resp.Result.Message)
	}

	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil {
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(out); err != nil {
		logger.V(2).Info("Writing admission response failed", "err", err)
	}
}
