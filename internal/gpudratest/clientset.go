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

package gpudratest

import (
	"fmt"
	"sync/atomic"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// SliceClientset is a fake clientset that behaves, for ResourceSlices, as
// an API server does where the ResourceSlice controller of
// k8s.io/dynamic-resource-allocation depends on it: it implements
// generateName, stamps resourceVersions and UIDs, and filters lists and
// watches of ResourceSlices by the field selectors the API server serves
// (spec.driver, spec.nodeName, spec.pool.name). The stock fake ignores
// field selectors, so a cluster-scoped pool's controller there would see
// the nodes' slices as its own and delete them.
func SliceClientset(objects ...runtime.Object) *fake.Clientset {
	cs := fake.NewClientset(objects...)
	var names, versions atomic.Int64
	stamp := func(action k8stesting.Action) (bool, runtime.Object, error) {
		withObj, ok := action.(interface{ GetObject() runtime.Object })
		if !ok {
			return false, nil, nil
		}
		obj, ok := withObj.GetObject().(metav1.Object)
		if !ok {
			return false, nil, nil
		}
		if obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), names.Add(1)))
		}
		if action.GetVerb() == "create" && obj.GetUID() == "" {
			obj.SetUID(types.UID(fmt.Sprintf("uid-%s-%s", obj.GetNamespace(), obj.GetName())))
		}
		obj.SetResourceVersion(fmt.Sprint(versions.Add(1)))
		return false, nil, nil // let the tracker store it
	}
	cs.PrependReactor("create", "*", stamp)
	cs.PrependReactor("update", "*", stamp)

	gvr := resourceapi.SchemeGroupVersion.WithResource("resourceslices")
	gvk := resourceapi.SchemeGroupVersion.WithKind("ResourceSlice")
	cs.PrependReactor("list", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sel := action.(k8stesting.ListAction).GetListRestrictions().Fields
		obj, err := cs.Tracker().List(gvr, gvk, "")
		if err != nil || sel == nil || sel.Empty() {
			return true, obj, err
		}
		list := obj.(*resourceapi.ResourceSliceList)
		kept := list.Items[:0]
		for _, s := range list.Items {
			if sel.Matches(sliceFields(&s)) {
				kept = append(kept, s)
			}
		}
		list.Items = kept
		return true, list, nil
	})
	cs.PrependWatchReactor("resourceslices", func(action k8stesting.Action) (bool, watch.Interface, error) {
		sel := action.(k8stesting.WatchAction).GetWatchRestrictions().Fields
		w, err := cs.Tracker().Watch(gvr, "")
		if err != nil || sel == nil || sel.Empty() {
			return true, w, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			s, ok := e.Object.(*resourceapi.ResourceSlice)
			return e, !ok || sel.Matches(sliceFields(s))
		}), nil
	})
	return cs
}

// sliceFields are the fields of a slice that the API server's field
// selectors for ResourceSlices read.
func sliceFields(s *resourceapi.ResourceSlice) fields.Set {
	node := ""
	if s.Spec.NodeName != nil {
		node = *s.Spec.NodeName
	}
	return fields.Set{
		resourceapi.ResourceSliceSelectorDriver:   s.Spec.Driver,
		resourceapi.ResourceSliceSelectorNodeName: node,
		resourceapi.ResourceSliceSelectorPoolName: s.Spec.Pool.Name,
	}
}
