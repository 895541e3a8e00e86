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

package nvmlfake

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The go-nvml mocks are structs of XxxFunc fields, and calling a method
// whose field is nil panics. Real NVML answers every call, mostly with
// ERROR_NOT_SUPPORTED for what a GPU lacks, and the real backend's code
// paths must not crash on the fake. The helpers here complete a mock by
// reflection after the fake has set the fields it implements.

var (
	returnType = reflect.TypeFor[nvml.Return]()
	errorType  = reflect.TypeFor[error]()
)

// funcFields calls visit for every settable XxxFunc field of the struct p
// points to, including those of embedded structs (server.Device embeds
// mock.Device). The fields of a type are found once (funcFieldsOf): a
// mock has hundreds, and gpudra check builds thousands of fake nodes.
func funcFields(p any, visit func(name string, f reflect.Value)) {
	v := reflect.ValueOf(p).Elem()
	for _, ff := range funcFieldsOf(v.Type()) {
		visit(ff.name, v.FieldByIndex(ff.index))
	}
}

// funcField is one XxxFunc field: its name without Func, and its index
// path through embedded structs.
type funcField struct {
	name  string
	index []int
}

// funcFieldCache holds the funcFields of each struct type (reflect.Type →
// []funcField).
var funcFieldCache sync.Map

func funcFieldsOf(t reflect.Type) []funcField {
	if c, ok := funcFieldCache.Load(t); ok {
		return c.([]funcField)
	}
	var out []funcField
	var walk func(t reflect.Type, path []int)
	walk = func(t reflect.Type, path []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			index := append(slices.Clone(path), i)
			switch {
			case sf.Anonymous && sf.Type.Kind() == reflect.Struct && sf.IsExported():
				walk(sf.Type, index)
			case sf.Type.Kind() == reflect.Func && sf.IsExported() && strings.HasSuffix(sf.Name, "Func"):
				out = append(out, funcField{name: strings.TrimSuffix(sf.Name, "Func"), index: index})
			}
		}
	}
	walk(t, nil)
	funcFieldCache.Store(t, out)
	return out
}

// notSupportedCache holds, per function type, the function fillNotSupported
// sets: it answers ERROR_NOT_SUPPORTED whoever holds it, so one serves
// every mock (reflect.Type → reflect.Value).
var notSupportedCache sync.Map

func notSupported(t reflect.Type) reflect.Value {
	if f, ok := notSupportedCache.Load(t); ok {
		return f.(reflect.Value)
	}
	f := reflect.MakeFunc(t, func([]reflect.Value) []reflect.Value {
		return results(t, nvml.ERROR_NOT_SUPPORTED)
	})
	notSupportedCache.Store(t, f)
	return f
}

// results returns the zero values of t's results with every nvml.Return
// set to ret and every error set to ret as an error.
func results(t reflect.Type, ret nvml.Return) []reflect.Value {
	out := make([]reflect.Value, t.NumOut())
	for i := range out {
		switch ot := t.Out(i); ot {
		case returnType:
			out[i] = reflect.ValueOf(ret)
		case errorType:
			err := fmt.Errorf("nvmlfake: %w", ret)
			out[i] = reflect.ValueOf(&err).Elem()
		default:
			out[i] = reflect.Zero(ot)
		}
	}
	return out
}

// returnsStatus reports whether a function of type t reports an
// nvml.Return, i.e. can tell its caller that it failed.
func returnsStatus(t reflect.Type) bool {
	for i := range t.NumOut() {
		if t.Out(i) == returnType {
			return true
		}
	}
	return false
}

// fillNotSupported makes every unset method of the mock p points to
// answer ERROR_NOT_SUPPORTED with zero values.
func fillNotSupported(p any) {
	funcFields(p, func(_ string, f reflect.Value) {
		if !f.IsNil() {
			return
		}
		f.Set(notSupported(f.Type()))
	})
}

// guardInit makes every method of the mock p points to that reports an
// nvml.Return fail with ERROR_UNINITIALIZED while ready says the library
// is not initialized, as libnvidia-ml does before nvmlInit and after the
// last nvmlShutdown. Methods named in exempt are left alone.
func guardInit(p any, ready func() bool, exempt ...string) {
	funcFields(p, func(name string, f reflect.Value) {
		if f.IsNil() || !returnsStatus(f.Type()) || slices.Contains(exempt, name) {
			return
		}
		inner, t := f.Interface(), f.Type()
		innerV := reflect.ValueOf(inner)
		f.Set(reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
			if !ready() {
				return results(t, nvml.ERROR_UNINITIALIZED)
			}
			return innerV.Call(args)
		}))
	})
}

// handleTypes are the handle interfaces whose library-level functions
// (lib.DeviceGetUUID(d)) go-nvml implements as the handle's method
// (d.GetUUID()).
var handleTypes = []struct {
	prefix string
	typ    reflect.Type
}{
	{"Device", reflect.TypeFor[nvml.Device]()},
	{"GpuInstance", reflect.TypeFor[nvml.GpuInstance]()},
	{"ComputeInstance", reflect.TypeFor[nvml.ComputeInstance]()},
	{"EventSet", reflect.TypeFor[nvml.EventSet]()},
	{"GpmSample", reflect.TypeFor[nvml.GpmSample]()},
	{"Unit", reflect.TypeFor[nvml.Unit]()},
	{"VgpuInstance", reflect.TypeFor[nvml.VgpuInstance]()},
	{"VgpuTypeId", reflect.TypeFor[nvml.VgpuTypeId]()},
}

// delegateToHandles sets every unset library-level function that takes a
// handle first (DeviceGetP2PStatus(d1, d2, i)) to call the handle's
// method (d1.GetP2PStatus(d2, i)), exactly as the real library does, so
// both spellings behave the same on the fake.
func delegateToHandles(p any) {
	funcFields(p, func(name string, f reflect.Value) {
		if !f.IsNil() {
			return
		}
		t := f.Type()
		for _, h := range handleTypes {
			method, ok := strings.CutPrefix(name, h.prefix)
			if !ok || t.NumIn() == 0 || t.In(0) != h.typ {
				continue
			}
			m, ok := h.typ.MethodByName(method)
			if !ok || !sameSignatureAfterFirst(t, m.Type) {
				continue
			}
			f.Set(reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
				if args[0].IsNil() {
					return results(t, nvml.ERROR_INVALID_ARGUMENT)
				}
				return args[0].MethodByName(method).Call(args[1:])
			}))
			return
		}
	})
}

// sameSignatureAfterFirst reports whether lib (handle, a...) (r...) and
// method (a...) (r...) take and return the same types.
func sameSignatureAfterFirst(lib, method reflect.Type) bool {
	if lib.NumIn()-1 != method.NumIn() || lib.NumOut() != method.NumOut() || lib.IsVariadic() != method.IsVariadic() {
		return false
	}
	for i := range method.NumIn() {
		if lib.In(i+1) != method.In(i) {
			return false
		}
	}
	for i := range method.NumOut() {
		if lib.Out(i) != method.Out(i) {
			return false
		}
	}
	return true
}
