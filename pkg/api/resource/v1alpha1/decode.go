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
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpudra/gpudra/internal/errorlist"
)

var (
	// strictSerializer rejects unknown and duplicate fields: a user's typo
	// ("sharng") must fail the claim rather than silently fall back to a
	// default.
	strictSerializer = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
		kjson.SerializerOptions{Strict: true})
	// lenientSerializer reads back configs this or another version of gpudra
	// accepted earlier, which may carry fields this version does not know.
	lenientSerializer = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
		kjson.SerializerOptions{})
)

// Decode reads opaque parameters strictly, applies defaults and validates
// them. raw is JSON, as the API server stores it in a ResourceClaim.
//
// Every problem found is reported at once, each prefixed with its field path
// relative to the parameters, e.g.
//
//	parameters.driverCapabilities[1]: Unsupported value: "cuda": supported values: ...
//	parameters: unknown field "sharng"
//	parameters.kind: "GpuConfg" is not known in resource.gpudra.io/v1alpha1; known kinds: GpuConfig, MigConfig
//
// Past errorlist.Max problems, the message lists the first ones and says how
// many there are ("first 10 of 2538 errors: [...]"), so that a config full
// of mistakes still gets a short message, quickly.
//
// The caller adds which claim and which config entry the parameters came
// from.
func Decode(raw []byte) (Config, error) {
	cfg, errs := decode(raw, strictSerializer)
	if cfg != nil {
		cfg.Default()
		if err := cfg.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errorlist.Summarize(errs); err != nil {
		return nil, err
	}
	return cfg, nil
}

// DecodeNonStrict reads parameters that were accepted earlier, e.g. from the
// node's checkpoint. It ignores unknown fields, so that a config written by a
// newer or older gpudra still reads, and it applies defaults but does not
// validate: the config was validated when it was first accepted, and
// rejecting it now would strand a prepared claim. A missing or unknown
// apiVersion or kind, or a value of the wrong type, is still an error.
func DecodeNonStrict(raw []byte) (Config, error) {
	cfg, errs := decode(raw, lenientSerializer)
	if err := errorlist.Summarize(errs); err != nil {
		return nil, err
	}
	cfg.Default()
	return cfg, nil
}

// strictDecoderMaxErrors is where the strict JSON decoder (sigs.k8s.io/json)
// stops collecting unknown and duplicate fields; past it the count is a
// lower bound, and the summary says "at least".
const strictDecoderMaxErrors = 100

// decode returns the decoded config, if any, and every error found. With a
// strict serializer a config can come back together with errors: unknown or
// duplicate fields do not stop decoding, so Decode can still validate the
// rest and report everything in one go.
func decode(raw []byte, serializer *kjson.Serializer) (Config, []error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, []error{field.Required(parametersPath,
			fmt.Sprintf("must be a %s object with apiVersion and kind", SchemeGroupVersion))}
	}
	if errs := checkTypeMeta(raw); len(errs) > 0 {
		return nil, errs
	}

	obj, _, err := serializer.Decode(raw, nil, nil)
	var errs []error
	if err != nil {
		strict, ok := runtime.AsStrictDecodingError(err)
		if !ok {
			if qerr := findBadQuantity(raw); qerr != nil {
				return nil, []error{qerr}
			}
			return nil, []error{translateJSONError(err)}
		}
		for _, e := range strict.Errors() {
			// The decoder reports the path from the root of the
			// parameters ("unknown field \"mig.foo\""), so the message
			// reads well under the parameters' own path.
			errs = append(errs, &decodeError{path: parametersPath.String(), msg: boundFieldName(e.Error())})
		}
		if len(strict.Errors()) >= strictDecoderMaxErrors {
			errs = append(errs, errorlist.More)
		}
	}
	cfg, ok := obj.(Config)
	if !ok {
		// Only a kind registered in the scheme but not implementing
		// Config can get here: a programming error.
		return nil, append(errs, fmt.Errorf("%s: decoded %T, which is not a device config", parametersPath, obj))
	}
	return cfg, errs
}

// checkTypeMeta reports a missing or wrong apiVersion or kind in terms the
// user can act on; the serializer's own messages name Go types and schemes.
func checkTypeMeta(raw []byte) []error {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		return []error{translateJSONError(err)}
	}

	apiVersionPath, kindPath := parametersPath.Child("apiVersion"), parametersPath.Child("kind")
	want := SchemeGroupVersion.String()
	switch tm.APIVersion {
	case want:
	case "":
		return []error{field.Required(apiVersionPath, "must be "+want)}
	default:
		// Checking the kind of another API would only add noise.
		return []error{field.NotSupported(apiVersionPath, errorlist.Value(tm.APIVersion), []string{want})}
	}

	kinds := knownKinds()
	switch {
	case tm.Kind == "":
		return []error{field.Required(kindPath, "known kinds: "+strings.Join(kinds, ", "))}
	case !slices.Contains(kinds, tm.Kind):
		return []error{&decodeError{path: kindPath.String(), msg: fmt.Sprintf("%q is not known in %s; known kinds: %s",
			errorlist.Value(tm.Kind), want, strings.Join(kinds, ", "))}}
	}
	return nil
}

// knownKinds lists the kinds of this API, sorted.
func knownKinds() []string {
	var kinds []string
	for k := range scheme.KnownTypes(SchemeGroupVersion) {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}

// translateJSONError turns the JSON decoder's errors, which name Go types,
// into errors that name the field and the JSON types the user wrote.
func translateJSONError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		path := parametersPath.String()
		if typeErr.Field != "" {
			path += "." + typeErr.Field
		}
		return &decodeError{path: path, msg: fmt.Sprintf("wrong type: got %s, want %s",
			typeErr.Value, describeType(typeErr.Type))}
	case errors.As(err, &syntaxErr):
		return &decodeError{path: parametersPath.String(), msg: fmt.Sprintf("invalid JSON at byte %d: %v",
			syntaxErr.Offset, syntaxErr)}
	default:
		return &decodeError{path: parametersPath.String(), msg: err.Error()}
	}
}

// describeType names a Go type as its JSON form.
func describeType(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "list of " + describeType(t.Elem()) + "s"
	case reflect.Pointer:
		return describeType(t.Elem())
	default:
		return t.String()
	}
}

// decodeError is a problem that is not about a value, so it has no
// field.ErrorType: an unknown field, a wrong JSON type, an unknown kind.
type decodeError struct {
	path string
	msg  string
}

func (e *decodeError) Error() string { return e.path + ": " + e.msg }

// strictFieldMessage is how the strict JSON decoder names a field it
// refuses: `unknown field "x"`, `duplicate field "x"`.
var strictFieldMessage = regexp.MustCompile(`^(unknown|duplicate) field (".*")$`)

// boundFieldName shortens the field name a strict decoding error quotes:
// JSON keys are as long as the user makes them.
func boundFieldName(msg string) string {
	m := strictFieldMessage.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	name, err := strconv.Unquote(m[2])
	if err != nil {
		return errorlist.Value(msg)
	}
	return fmt.Sprintf("%s field %q", m[1], errorlist.Value(name))
}
