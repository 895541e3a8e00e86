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

package plugin

import (
	"errors"
	"fmt"
	"maps"

	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// The plugin is ready when a scheduler can allocate its GPUs and the
// kubelet can prepare them: the ResourceSlices it wants are what the API
// server holds, and the kubelet has registered the plugin. It watches its
// own node's slices (a field-selected watch, a handful of objects;
// slicewatch.go) to know the first, and asks the kubeletplugin helper for the second.

// Ready says why the plugin is not ready, or nil: its slices are published
// as built, and the kubelet registered it.
func (d *Driver) Ready() error {
	var errs []error
	if d.helper == nil {
		return errors.New("not serving the kubelet yet")
	}
	if st := d.helper.RegistrationStatus(); st == nil {
		errs = append(errs, errors.New("the kubelet has not registered the plugin yet"))
	} else if !st.PluginRegistered {
		errs = append(errs, fmt.Errorf("the kubelet refused to register the plugin: %s", st.Error))
	}
	if err := d.pub.slicesPublished(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Published says why the API server does not hold the slices the plugin
// publishes now, or nil: no change of the GPUs in use (or of the spares
// assigned) waits to be published, every step towards the slices last
// built was handed over, and the newest complete generation of the node's
// pool holds them. In-process callers (the simulated node) wait for it
// before they schedule.
func (d *Driver) Published() error { return d.pub.published() }

// published is Published.
func (p *publisher) published() error {
	if p.publishPending() {
		return errors.New("a change of the GPUs in use or of the spares assigned is not published yet")
	}
	p.publishMu.Lock()
	wanted := p.steps.wanted
	p.publishMu.Unlock()
	if wanted == nil {
		return errors.New("no ResourceSlices built yet")
	}
	return p.sameAsStored(*wanted)
}

// sameAsStored says how the API server's newest complete generation of
// the node's pool differs from pool, or nil; the slices it holds lack
// the fields of the features it dropped.
func (p *publisher) sameAsStored(pool resourceslice.Pool) error {
	p.mu.Lock()
	disabled := maps.Clone(p.disabledFeatures)
	p.mu.Unlock()
	return p.slices.sameAsStored(pool, disabled)
}

// slicesPublished says whether the API server holds what the controller
// was last given: between the steps of a change that touches several
// slices the plugin stays ready, as the pool stays complete and usable.
func (p *publisher) slicesPublished() error {
	p.publishMu.Lock()
	handed := p.steps.handed
	p.publishMu.Unlock()
	if handed == nil {
		return errors.New("no ResourceSlices built yet")
	}
	return p.sameAsStored(*handed)
}
