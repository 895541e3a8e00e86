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
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpudra/gpudra/internal/errorlist"
)

var quantityType = reflect.TypeFor[resource.Quantity]()

// findBadQuantity names the field of a quantity that does not parse. The
// JSON decoder reports a malformed quantity ("20 GB") without saying where
// it is; this walks the parameters along the Go type of their kind and
// returns the first quantity-typed value that resource.ParseQuantity
// rejects, with its path, or nil when there is none (or the parameters do
// not read as an object of a known kind).
func findBadQuantity(raw []byte) error {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil
	}
	kind, _ := obj["kind"].(string)
	typ, ok := scheme.KnownTypes(SchemeGroupVersion)[kind]
	if !ok {
		return nil
	}
	return badQuantityIn(obj, typ, parametersPath.String())
}

// badQuantityIn walks value (generic JSON) along the Go type t.
func badQuantityIn(value any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == quantityType {
		s, ok := value.(string)
		if !ok {
			return nil // numbers parse; other types are the decoder's to report
		}
		if _, err := resource.ParseQuantity(s); err != nil {
			return &decodeError{path: path, msg: fmt.Sprintf("%q is not a quantity (%v); write e.g. 20Gi or 512Mi", errorlist.Value(s), err)}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := value.(map[string]any)
		if !ok {
			return nil
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if v, ok := m[name]; ok {
				if err := badQuantityIn(v, f.Type, path+"."+name); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		m, ok := value.(map[string]any)
		if !ok {
			return nil
		}
		for _, k := range sortedKeys(m) {
			if err := badQuantityIn(m[k], t.Elem(), path+"["+k+"]"); err != nil {
				return err
			}
		}
	case reflect.Slice:
		l, ok := value.([]any)
		if !ok {
			return nil
		}
		for i, v := range slices.All(l) {
			if err := badQuantityIn(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}
