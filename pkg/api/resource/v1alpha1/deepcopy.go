package v1alpha1

import "k8s.io/apimachinery/pkg/runtime"

// Written by hand in the shape deepcopy-gen produces. Every slice, map and
// pointer field must be copied here, or two configs would share memory.

// DeepCopyInto copies c into out.
func (c *GpuConfig) DeepCopyInto(out *GpuConfig) {
	*out = *c
	out.DriverCapabilities = copyStrings(c.DriverCapabilities)
}

// DeepCopy returns a copy of c that shares no memory with it.
func (c *GpuConfig) DeepCopy() *GpuConfig {
	if c == nil {
		return nil
	}
	out := new(GpuConfig)
	c.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (c *GpuConfig) DeepCopyObject() runtime.Object {
	if c := c.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies c into out.
func (c *MigConfig) DeepCopyInto(out *MigConfig) {
	*out = *c
	out.DriverCapabilities = copyStrings(c.DriverCapabilities)
}

// DeepCopy returns a copy of c that shares no memory with it.
func (c *MigConfig) DeepCopy() *MigConfig {
	if c == nil {
		return nil
	}
	out := new(MigConfig)
	c.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (c *MigConfig) DeepCopyObject() runtime.Object {
	if c := c.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// copyStrings keeps nil as nil and empty as empty, so that a copy encodes
// exactly like the original.
func copyStrings(in []string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	copy(out, in)
	return out
}
