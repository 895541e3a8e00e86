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
	"fmt"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpudra/gpudra/internal/errorlist"
)

// SharingStrategy is how the processes of the containers that use one
// device share it.
type SharingStrategy string

const (
	// TimeSlicingStrategy lets the GPU's scheduler rotate the whole device
	// among its clients, one context at a time. There is no memory or fault
	// isolation between them.
	TimeSlicingStrategy SharingStrategy = "TimeSlicing"
	// MPSStrategy runs one CUDA MPS control daemon per device: the clients
	// share one GPU context and run kernels concurrently, each with its own
	// limits on threads and pinned device memory, in one fault domain.
	MPSStrategy SharingStrategy = "MPS"
)

// SupportedSharingStrategies lists every value strategy accepts, in the
// order error messages show them.
var SupportedSharingStrategies = []string{string(TimeSlicingStrategy), string(MPSStrategy)}

// TimeSliceInterval is the length of the slices the GPU's scheduler gives
// each context in turn: the driver's compute policy ("nvidia-smi
// compute-policy --set-timeslice").
type TimeSliceInterval string

const (
	// DefaultTimeSlice is the driver's default.
	DefaultTimeSlice TimeSliceInterval = "Default"
	// ShortTimeSlice favours latency: more, shorter turns.
	ShortTimeSlice TimeSliceInterval = "Short"
	// MediumTimeSlice lies between Short and Long.
	MediumTimeSlice TimeSliceInterval = "Medium"
	// LongTimeSlice favours throughput: fewer context switches.
	LongTimeSlice TimeSliceInterval = "Long"
)

// SupportedTimeSliceIntervals lists every value interval accepts.
var SupportedTimeSliceIntervals = []string{
	string(DefaultTimeSlice), string(ShortTimeSlice), string(MediumTimeSlice), string(LongTimeSlice),
}

// Level is the interval as the driver's compute policy numbers it
// (nvidia-smi compute-policy --set-timeslice: 0 default, 1 short, 2 medium,
// 3 long), or -1 for a value that is not an interval.
func (i TimeSliceInterval) Level() int {
	return slices.Index(SupportedTimeSliceIntervals, string(i))
}

// Sharing says how the containers of one claim (and, with consumable
// capacity, of several claims) share each device the config applies to.
//
// Without it a device is not shared beyond what the claim itself does: the
// containers that reference the claim use the GPU as the driver lets them
// by default (time-sliced, at the default interval).
//
// Example, an MPS client limited to half the streaming multiprocessors and
// 20 GiB of pinned device memory:
//
//	sharing:
//	  strategy: MPS
//	  mps:
//	    defaultActiveThreadPercentage: 50
//	    defaultPinnedDeviceMemoryLimit: 20Gi
type Sharing struct {
	// Strategy is TimeSlicing or MPS. Required.
	Strategy SharingStrategy `json:"strategy"`

	// TimeSlicing configures the TimeSlicing strategy; allowed only with
	// it. Default: interval Default.
	//
	// +optional
	TimeSlicing *TimeSlicingConfig `json:"timeSlicing,omitempty"`

	// MPS configures the MPS strategy; allowed only with it. Default: no
	// limits beyond the claim's consumable capacity, if any.
	//
	// +optional
	MPS *MPSConfig `json:"mps,omitempty"`
}

// TimeSlicingConfig configures the time-slice interval of the GPUs the
// config applies to.
type TimeSlicingConfig struct {
	// Interval is Default, Short, Medium or Long. It is a setting of the
	// whole GPU, applied when the first claim that asks for it is prepared
	// and restored to Default when the last one goes; claims that share a
	// GPU must ask for the same interval (a claim asking for another one
	// fails to prepare, and its pod's event says which claim holds the
	// GPU). MIG partitions accept only Default: the interval applies to
	// the whole GPU, not to one partition.
	//
	// Default: Default.
	//
	// +optional
	Interval TimeSliceInterval `json:"interval,omitempty"`
}

// MPSConfig sets the limits of the claim's MPS clients. They reach the
// containers as CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, so each claim on a shared device has
// its own limits.
type MPSConfig struct {
	// DefaultActiveThreadPercentage limits the share of the device's
	// streaming multiprocessors each client process may use, 1 to 100.
	// With consumable capacity, a claim that was allocated a number of
	// multiprocessors gets at most that share.
	//
	// +optional
	DefaultActiveThreadPercentage *int32 `json:"defaultActiveThreadPercentage,omitempty"`

	// DefaultPinnedDeviceMemoryLimit limits the device memory each client
	// process may allocate on every device of the request, at least 1Mi;
	// MPS counts it in whole MiB (a remainder is dropped). With consumable
	// capacity, a claim that was allocated an amount of memory gets at
	// most that amount.
	//
	// +optional
	DefaultPinnedDeviceMemoryLimit *resource.Quantity `json:"defaultPinnedDeviceMemoryLimit,omitempty"`

	// PerDevicePinnedMemoryLimits overrides DefaultPinnedDeviceMemoryLimit
	// for single devices, keyed by the device's CUDA ordinal as the
	// container sees it ("0") or by a GPU's UUID ("GPU-…"); MIG devices
	// get a new UUID each time gpudra creates them, so key them by
	// ordinal. A claim has one MPS device (a client connects to one MPS
	// control daemon), so the ordinal is "0"; a key that names no device
	// of the claim fails the prepare.
	//
	// +optional
	PerDevicePinnedMemoryLimits map[string]resource.Quantity `json:"perDevicePinnedMemoryLimits,omitempty"`
}

// Default fills in the settings of the chosen strategy. It is idempotent.
func (s *Sharing) Default() {
	if s == nil {
		return
	}
	switch s.Strategy {
	case TimeSlicingStrategy:
		if s.TimeSlicing == nil {
			s.TimeSlicing = &TimeSlicingConfig{}
		}
		if s.TimeSlicing.Interval == "" {
			s.TimeSlicing.Interval = DefaultTimeSlice
		}
	case MPSStrategy:
		if s.MPS == nil {
			s.MPS = &MPSConfig{}
		}
	}
}

// IsMPS reports whether the strategy is MPS.
func (s *Sharing) IsMPS() bool { return s != nil && s.Strategy == MPSStrategy }

// IsTimeSlicing reports whether the strategy is TimeSlicing.
func (s *Sharing) IsTimeSlicing() bool { return s != nil && s.Strategy == TimeSlicingStrategy }

// Interval is the time-slice interval the config asks for, Default unless
// the strategy is TimeSlicing with another interval.
func (s *Sharing) Interval() TimeSliceInterval {
	if s.IsTimeSlicing() && s.TimeSlicing != nil && s.TimeSlicing.Interval != "" {
		return s.TimeSlicing.Interval
	}
	return DefaultTimeSlice
}

// Limits on MPS settings.
const (
	// MaxPerDeviceLimits bounds perDevicePinnedMemoryLimits: no node has
	// more devices than this in one request.
	MaxPerDeviceLimits = 64
)

// minPinnedMemory is the smallest pinned memory limit: MPS takes whole
// MiB, so anything less would round to no memory at all. maxPinnedMemory
// is far beyond any GPU's memory and keeps the value within an int64.
var (
	minPinnedMemory = resource.MustParse("1Mi")
	maxPinnedMemory = resource.MustParse("1Pi")
)

// deviceKey is what a perDevicePinnedMemoryLimits key may be: a CUDA
// ordinal, or a GPU UUID as NVML reports it.
var deviceKey = regexp.MustCompile(`^(0|[1-9][0-9]{0,2}|GPU-[0-9a-fA-F-]{8,64})$`)

// validate reports every invalid field of s, under path. forMig is true
// for the sharing of MIG partitions.
func (s *Sharing) validate(path *field.Path, forMig bool) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	strategyPath := path.Child("strategy")
	switch s.Strategy {
	case "":
		errs = append(errs, field.Required(strategyPath, "set TimeSlicing or MPS, or remove sharing"))
	case TimeSlicingStrategy, MPSStrategy:
	default:
		errs = append(errs, field.NotSupported(strategyPath, errorlist.Value(string(s.Strategy)), SupportedSharingStrategies))
	}
	if s.TimeSlicing != nil && s.Strategy != TimeSlicingStrategy {
		errs = append(errs, field.Forbidden(path.Child("timeSlicing"),
			fmt.Sprintf("applies only with strategy TimeSlicing, not %q: remove timeSlicing or set strategy: TimeSlicing", errorlist.Value(string(s.Strategy)))))
	}
	if s.MPS != nil && s.Strategy != MPSStrategy {
		errs = append(errs, field.Forbidden(path.Child("mps"),
			fmt.Sprintf("applies only with strategy MPS, not %q: remove mps or set strategy: MPS", errorlist.Value(string(s.Strategy)))))
	}
	if s.TimeSlicing != nil {
		errs = append(errs, s.TimeSlicing.validate(path.Child("timeSlicing"), forMig)...)
	}
	if s.MPS != nil {
		errs = append(errs, s.MPS.validate(path.Child("mps"))...)
	}
	return errs
}

func (t *TimeSlicingConfig) validate(path *field.Path, forMig bool) field.ErrorList {
	intervalPath := path.Child("interval")
	switch {
	case t.Interval == "":
		// Defaulted to Default; only a config read without defaults gets
		// here.
		return nil
	case t.Interval.Level() < 0:
		return field.ErrorList{field.NotSupported(intervalPath, errorlist.Value(string(t.Interval)), SupportedTimeSliceIntervals)}
	case forMig && t.Interval != DefaultTimeSlice:
		return field.ErrorList{field.Invalid(intervalPath, errorlist.Value(string(t.Interval)),
			"a MIG partition cannot have its own time-slice interval: it is a setting of the whole GPU; use Default (or omit it), or share a whole GPU with a GpuConfig")}
	}
	return nil
}

func (m *MPSConfig) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p := m.DefaultActiveThreadPercentage; p != nil && (*p < 1 || *p > 100) {
		errs = append(errs, field.Invalid(path.Child("defaultActiveThreadPercentage"), *p,
			"must be a percentage from 1 to 100"))
	}
	if q := m.DefaultPinnedDeviceMemoryLimit; q != nil {
		errs = append(errs, validatePinnedMemory(path.Child("defaultPinnedDeviceMemoryLimit"), *q)...)
	}
	limitsPath := path.Child("perDevicePinnedMemoryLimits")
	if n := len(m.PerDevicePinnedMemoryLimits); n > MaxPerDeviceLimits {
		errs = append(errs, field.TooMany(limitsPath, n, MaxPerDeviceLimits))
	}
	for _, key := range sortedKeys(m.PerDevicePinnedMemoryLimits) {
		keyPath := limitsPath.Key(errorlist.Value(key))
		if !deviceKey.MatchString(key) {
			errs = append(errs, field.Invalid(keyPath, errorlist.Value(key),
				`a key must be a CUDA device ordinal ("0") or a GPU UUID ("GPU-…"); MIG devices get a new UUID each time gpudra creates them, so key them by ordinal`))
		}
		errs = append(errs, validatePinnedMemory(keyPath, m.PerDevicePinnedMemoryLimits[key])...)
	}
	return errs
}

func validatePinnedMemory(path *field.Path, q resource.Quantity) field.ErrorList {
	switch {
	case q.Cmp(minPinnedMemory) < 0:
		return field.ErrorList{field.Invalid(path, q.String(),
			"must be at least 1Mi: MPS counts pinned device memory in whole MiB")}
	case q.Cmp(maxPinnedMemory) > 0:
		return field.ErrorList{field.Invalid(path, q.String(), "must be at most 1Pi")}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// PinnedMemoryMiB renders a pinned memory limit as MPS takes it: whole MiB
// with the "M" suffix, e.g. "20480M" for 20Gi.
func PinnedMemoryMiB(q resource.Quantity) string {
	return fmt.Sprintf("%dM", q.Value()>>20)
}

// SharingNone is the flag value for no sharing.
const SharingNone = "None"

// SharingFromFlag returns the defaulted sharing a node-wide setting names:
// "MPS", "TimeSlicing" (at the Default interval), or "None" (nil).
func SharingFromFlag(value string) (*Sharing, error) {
	switch value {
	case SharingNone:
		return nil, nil
	case string(MPSStrategy), string(TimeSlicingStrategy):
		s := &Sharing{Strategy: SharingStrategy(value)}
		s.Default()
		return s, nil
	}
	return nil, fmt.Errorf("unknown sharing %q: use %s, %s or %s", errorlist.Value(value), MPSStrategy, TimeSlicingStrategy, SharingNone)
}
