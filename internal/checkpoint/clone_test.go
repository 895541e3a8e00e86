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

package checkpoint

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCloneSharesNothing: a clone shares nothing with its original, so a
// snapshot being written stays what it was while the original changes, and
// the other way round. Every field of every checkpoint type is filled
// through reflection and then changed, so a field added later (a slice, a
// map, a pointer) that Clone forgets to copy fails this test without anyone
// having to remember to list it here.
func TestCloneSharesNothing(t *testing.T) {
	build := func() *Checkpoint {
		cp := new(Checkpoint)
		(&filler{t: t}).fill(reflect.ValueOf(cp).Elem(), "Checkpoint")
		return cp
	}
	want := build()
	for _, changed := range []string{"clone", "original"} {
		t.Run("change the "+changed, func(t *testing.T) {
			orig := build()
			clone := orig.Clone()
			if diff := cmp.Diff(want, clone); diff != "" {
				t.Fatalf("clone differs from the original (-original +clone):\n%s", diff)
			}
			change, keep := clone, orig
			if changed == "original" {
				change, keep = orig, clone
			}
			if n := mutate(t, reflect.ValueOf(change).Elem(), "Checkpoint"); n == 0 {
				t.Fatal("mutate changed no field")
			}
			if reflect.DeepEqual(change, want) {
				t.Fatal("mutate left the " + changed + " as it was")
			}
			if diff := cmp.Diff(want, keep); diff != "" {
				t.Errorf("changing the %s changed the other copy, which shares these with it (-want +got):\n%s", changed, diff)
			}
		})
	}
}

var timeType = reflect.TypeFor[time.Time]()

// filler sets every field reachable from a value to a distinct value that
// is not the zero value: pointers point at filled values, slices and maps
// hold two filled elements.
type filler struct {
	t *testing.T
	n int
}

func (f *filler) next() int {
	f.n++
	return f.n
}

func (f *filler) fill(v reflect.Value, path string) {
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(time.Unix(int64(1_000_000+f.next()), 0).UTC()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", f.next()))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.next()%100 + 1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.next()%100 + 1))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.next()) + 0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), path)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range s.Len() {
			f.fill(s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMapWithSize(v.Type(), 2)
		for range 2 {
			k := reflect.New(v.Type().Key()).Elem()
			f.fill(k, path+"[key]")
			e := reflect.New(v.Type().Elem()).Elem()
			f.fill(e, fmt.Sprintf("%s[%v]", path, k))
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() {
				f.t.Fatalf("%s.%s is unexported: teach this test to fill it", path, sf.Name)
			}
			f.fill(v.Field(i), path+"."+sf.Name)
		}
	default:
		f.t.Fatalf("%s: this test cannot fill a %s; teach it to", path, v.Type())
	}
}

// mutate changes, in place, every field reachable from v (through
// pointers, slice elements and map values, never by replacing a pointer,
// slice or map), and returns how many it changed.
func mutate(t *testing.T, v reflect.Value, path string) int {
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Second)))
		return 1
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "'")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.Pointer:
		if v.IsNil() {
			t.Fatalf("%s is nil: fill missed it", path)
		}
		return mutate(t, v.Elem(), path)
	case reflect.Slice:
		n := 0
		for i := range v.Len() {
			n += mutate(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		return n
	case reflect.Map:
		n := 0
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			n += mutate(t, e, fmt.Sprintf("%s[%v]", path, k))
			v.SetMapIndex(k, e)
		}
		return n
	case reflect.Struct:
		n := 0
		for i := range v.NumField() {
			n += mutate(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
		return n
	default:
		t.Fatalf("%s: this test cannot change a %s; teach it to", path, v.Type())
	}
	return 1
}
