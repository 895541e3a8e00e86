package admission

import (
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configapi "github.com/gpudra/gpudra/pkg/api/resource/v1alpha1"
	"github.com/gpudra/gpudra/pkg/claimplan"
	"github.com/gpudra/gpudra/pkg/errorlist"
)

// Result is what Review decided, for metrics and logs.
type Result string

const (
	// Allowed: every config of this driver decodes and validates, or the
	// object has none, or an UPDATE left them unchanged.
	Allowed Result = "allowed"
	// Denied: at least one config of this driver is invalid.
	Denied Result = "denied"
	// Errored: the request itself was unusable (unknown kind, unreadable
	// object); the API server applies the webhook's failurePolicy.
	Errored Result = "error"
)

// configReference is where a user reads what the configs may hold.
const configReference = "https://github.com/gpudra/gpudra#device-configuration-resourcegpudraiov1alpha1"

// Validator checks the opaque configs of one DRA driver.
type Validator struct {
	// DriverName is the driver whose configs are validated; configs of
	// every other driver pass untouched.
	DriverName string
}

// Review answers one admission request. It never returns nil.
func (v Validator) Review(req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, Result) {
	resp := &admissionv1.AdmissionResponse{UID: req.UID}
	if req.Kind.Group != ResourceGroup {
		return errored(resp, fmt.Errorf("%s is not in API group %s", req.Kind, ResourceGroup))
	}
	kind := req.Kind.Kind
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		resp.Allowed = true
		return resp, Allowed
	}
	configs, err := configsOf(kind, req.Object.Raw)
	if err != nil {
		return errored(resp, err)
	}
	configs = ofDriver(configs, v.DriverName)
	if len(configs) == 0 {
		resp.Allowed = true
		return resp, Allowed
	}
	if req.Operation == admissionv1.Update {
		old, err := configsOf(kind, req.OldObject.Raw)
		if err == nil && sameConfigs(ofDriver(old, v.DriverName), configs) {
			resp.Allowed = true
			return resp, Allowed
		}
	}

	var causes []metav1.StatusCause
	for _, c := range configs {
		if _, err := claimplan.DecodeConfig(c.parameters); err != nil {
			shown, total, atLeast := errorlist.Split(err)
			for _, e := range shown {
				// The config API's errors start at "parameters"; put
				// the entry's own path in front so that the message
				// leads to the value.
				path, msg := splitPath(e.Error())
				causes = append(causes, metav1.StatusCause{
					Type:    metav1.CauseTypeFieldValueInvalid,
					Field:   c.path.String() + "." + path,
					Message: msg,
				})
			}
			if more := total - len(shown); more > 0 || atLeast {
				causes = append(causes, metav1.StatusCause{
					Type:    metav1.CauseTypeFieldValueInvalid,
					Field:   c.path.String() + ".parameters",
					Message: moreErrors(more, atLeast),
				})
			}
		}
	}
	if len(causes) == 0 {
		resp.Allowed = true
		return resp, Allowed
	}
	msgs := make([]string, len(causes))
	for i, c := range causes {
		msgs[i] = c.Field + ": " + c.Message
	}
	resp.Result = &metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusUnprocessableEntity,
		Reason: metav1.StatusReasonInvalid,
		Message: fmt.Sprintf("%s %s: invalid %s config for driver %s: %s (the fields gpudra's configs take: %s)",
			kind, objectName(req), configapi.SchemeGroupVersion, v.DriverName, strings.Join(msgs, "; "), configReference),
		Details: &metav1.StatusDetails{Name: req.Name, Group: ResourceGroup, Kind: kind, Causes: causes},
	}
	return resp, Denied
}

// errored answers a request that could not be judged.
func errored(resp *admissionv1.AdmissionResponse, err error) (*admissionv1.AdmissionResponse, Result) {
	resp.Allowed = false
	resp.Result = &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusBadRequest,
		Reason:  metav1.StatusReasonBadRequest,
		Message: "gpudra admission: " + err.Error(),
	}
	return resp, Errored
}

// moreErrors says how many errors a config had beyond those listed.
func moreErrors(more int, atLeast bool) string {
	if atLeast {
		return fmt.Sprintf("and at least %d more errors", more)
	}
	return fmt.Sprintf("and %d more errors", more)
}

// splitPath splits a config API error into the field path it starts with
// and the rest ("parameters.driverCapabilities[1]: Unsupported value: …"
// → "parameters.driverCapabilities[1]", "Unsupported value: …"). kubectl
// prints each cause as "<field>: <message>", so the message must not
// repeat the path.
func splitPath(msg string) (path, rest string) {
	if p, r, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(p, "parameters") && !strings.Contains(p, " ") {
		return p, r
	}
	return "parameters", msg
}

// objectName is namespace/name, or the name alone for a cluster-scoped
// object. A claim created from generateName has no name yet.
func objectName(req *admissionv1.AdmissionRequest) string {
	name := req.Name
	if name == "" {
		name = "(generated name)"
	}
	if req.Namespace != "" {
		return req.Namespace + "/" + name
	}
	return name
}
