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

package scheduler

import (
	"fmt"
	"sort"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
)

// Classes are the DeviceClasses the scheduler sees. They serve the
// allocator (structured.DeviceClassLister) and map extended resource names
// to classes with the scheduler's own cache (explicit
// spec.extendedResourceName, and the implicit
// deviceclass.resource.kubernetes.io/<class name>).
type Classes struct {
	byName   map[string]*resourceapi.DeviceClass
	extended *extendedresourcecache.ExtendedResourceCache
}

// NewClasses indexes classes by name; a later class replaces an earlier
// one of the same name, as a later apply does.
func NewClasses(classes []*resourceapi.DeviceClass) *Classes {
	// The cache logs each class it indexes at V(5), and objects that are
	// no DeviceClass, which cannot happen here: nothing worth a logger.
	c := &Classes{byName: map[string]*resourceapi.DeviceClass{}, extended: extendedresourcecache.NewExtendedResourceCache(logr.Discard())}
	for _, dc := range classes {
		if old, ok := c.byName[dc.Name]; ok {
			c.extended.OnUpdate(old, dc)
		} else {
			c.extended.OnAdd(dc, true)
		}
		c.byName[dc.Name] = dc
	}
	return c
}

// List returns the classes sorted by name.
func (c *Classes) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(c.byName))
	for _, dc := range c.byName {
		out = append(out, dc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get returns a class, or a NotFound error as the API server's lister does.
func (c *Classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc, ok := c.byName[name]; ok {
		return dc, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// ForExtendedResource returns the class that backs an extended resource,
// or nil.
func (c *Classes) ForExtendedResource(name v1.ResourceName) *resourceapi.DeviceClass {
	return c.extended.GetDeviceClass(name)
}

func (c *Classes) String() string { return fmt.Sprintf("%d DeviceClass(es)", len(c.byName)) }
