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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// baseEvents are the event types every modelled driver's GPUs accept; of
// them only XIDs are ever delivered.
const baseEvents uint64 = nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError

// recoveryEventsSince is the first driver branch with
// nvmlEventTypeGpuRecoveryAction: NVML API Reference, "Change Log",
// "Changes between v560 and v565" ("Added new event type
// nvmlEventTypeGpuRecoveryAction", with the field
// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
// https://docs.nvidia.com/deploy/nvml-api/latest/change-log.html). The event
// carries no data of its own (nvml.h, nvmlEventData_t: eventData "is 0
// for any other event" than an XID); the client reads the field to learn
// the new action.
const recoveryEventsSince = 565

// supportedEvents are the event types this Server's GPUs accept: what
// nvmlDeviceGetSupportedEventTypes reports on the modelled driver.
func (s *Server) supportedEvents() uint64 {
	major, _, _ := strings.Cut(s.profile.driverVersion, ".")
	if n, err := strconv.Atoi(major); err == nil && n >= recoveryEventsSince {
		return baseEvents | nvml.EventTypeGpuRecoveryAction
	}
	return baseEvents
}

// pollInterval is how often Wait looks at the event log.
const pollInterval = 20 * time.Millisecond

// noInstance is the GPU and compute instance ID of an event that concerns
// the whole GPU.
const noInstance = 0xFFFFFFFF

// eventSet implements nvml.EventSet over the XID log. It is a type of its
// own rather than go-nvml's mock.EventSet because the mock records every
// call, and a health watcher calls Wait forever.
type eventSet struct {
	s *Server

	mu sync.Mutex
	// offset is the next unread byte of the log.
	offset int64
	regs   map[*fakeGPU]registration
	freed  bool
}

// registration is what a GPU registered in an event set.
type registration struct {
	types uint64
	// since is the log offset at registration: earlier events are not
	// delivered, as NVML records none before nvmlDeviceRegisterEvents.
	since int64
}

var _ nvml.EventSet = (*eventSet)(nil)

func (s *Server) eventSetCreate() (nvml.EventSet, nvml.Return) {
	return &eventSet{s: s, regs: map[*fakeGPU]registration{}}, nvml.SUCCESS
}

func (g *fakeGPU) installEvents() {
	supported := g.s.supportedEvents()
	g.dev.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return supported, nvml.SUCCESS }
	g.dev.RegisterEventsFunc = func(types uint64, set nvml.EventSet) nvml.Return {
		es, ok := set.(*eventSet)
		if !ok || es.s != g.s || types == 0 {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		if types&^supported != 0 {
			return nvml.ERROR_NOT_SUPPORTED // and nothing is registered
		}
		return es.register(g, types)
	}
}

func (es *eventSet) register(g *fakeGPU, types uint64) nvml.Return {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.freed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	now := es.s.events.end()
	if len(es.regs) == 0 {
		es.offset = now
	}
	reg, ok := es.regs[g]
	if !ok {
		reg.since = now
	}
	reg.types |= types
	es.regs[g] = reg
	return nvml.SUCCESS
}

// Wait returns the next event of a registered GPU, or ERROR_TIMEOUT when
// none arrives within timeoutMs.
func (es *eventSet) Wait(timeoutMs uint32) (nvml.EventData, nvml.Return) {
	deadline := time.Now().Add(time.Duration(timeoutMs) * time.Millisecond)
	for {
		if !es.s.life.ready() {
			return nvml.EventData{}, nvml.ERROR_UNINITIALIZED
		}
		ev, ok, ret := es.next()
		if ret != nvml.SUCCESS || ok {
			return ev, ret
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
		time.Sleep(min(pollInterval, left))
	}
}

// next consumes the log up to and including the first event for this
// set.
func (es *eventSet) next() (nvml.EventData, bool, nvml.Return) {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.freed {
		return nvml.EventData{}, false, nvml.ERROR_INVALID_ARGUMENT
	}
	if len(es.regs) == 0 {
		return nvml.EventData{}, false, nvml.SUCCESS
	}
	recs, err := es.s.events.readFrom(es.offset)
	if err != nil {
		logStoreError(es.s.opts.Logger, err)
		return nvml.EventData{}, false, nvml.ERROR_UNKNOWN
	}
	for _, r := range recs {
		es.offset = r.end
		if ev, ok := es.match(r); ok {
			return ev, true, nvml.SUCCESS
		}
	}
	return nvml.EventData{}, false, nvml.SUCCESS
}

// match turns a logged record into an event, if it concerns a GPU
// registered for its type since before it was logged.
func (es *eventSet) match(r loggedXID) (nvml.EventData, bool) {
	if r.Event == recoveryActionEvent {
		for g, reg := range es.regs {
			if reg.types&nvml.EventTypeGpuRecoveryAction != 0 && r.start >= reg.since && r.UUID == g.uuid {
				// Whole-GPU, no data: nvml.h, nvmlEventData_t.
				return nvml.EventData{Device: g.dev, EventType: nvml.EventTypeGpuRecoveryAction,
					GpuInstanceId: noInstance, ComputeInstanceId: noInstance}, true
			}
		}
		return nvml.EventData{}, false
	}
	if r.Event != "" {
		return nvml.EventData{}, false // a kind this fake does not know
	}
	for g, reg := range es.regs {
		if reg.types&nvml.EventTypeXidCriticalError == 0 || r.start < reg.since {
			continue
		}
		ev := nvml.EventData{
			Device:            g.dev,
			EventType:         nvml.EventTypeXidCriticalError,
			EventData:         r.XID,
			GpuInstanceId:     noInstance,
			ComputeInstanceId: noInstance,
		}
		if r.UUID == g.uuid {
			return ev, true
		}
		// An XID in a MIG device is reported on its parent, with the
		// instance IDs set.
		if mig, ok := g.s.migDeviceByUUID(r.UUID); ok {
			if parent, _ := mig.GetDeviceHandleFromMigDeviceHandle(); parent == nvml.Device(g.dev) {
				gi, _ := mig.GetGpuInstanceId()
				ci, _ := mig.GetComputeInstanceId()
				ev.GpuInstanceId, ev.ComputeInstanceId = uint32(gi), uint32(ci)
				return ev, true
			}
		}
	}
	return nvml.EventData{}, false
}

func (es *eventSet) Free() nvml.Return {
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.freed {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	es.freed = true
	return nvml.SUCCESS
}

// The newer event APIs are not implemented: callers must fall back, as
// they must on drivers that predate them.

func (es *eventSet) Wait_v3(uint32) (nvml.EventSetWaitData_v3, nvml.Return) {
	return nvml.EventSetWaitData_v3{}, nvml.ERROR_NOT_SUPPORTED
}

func (es *eventSet) GetContextCount_v1() (nvml.GetContextCount_v1, nvml.Return) {
	return nvml.GetContextCount_v1{}, nvml.ERROR_NOT_SUPPORTED
}

func (es *eventSet) GetContextData_v1(nvml.GetContextData_v1) (nvml.GetContextData_v1, nvml.Return) {
	return nvml.GetContextData_v1{}, nvml.ERROR_NOT_SUPPORTED
}

func (es *eventSet) GetContextInfo_v1(uint32) (nvml.GetContextInfo_v1, nvml.Return) {
	return nvml.GetContextInfo_v1{}, nvml.ERROR_NOT_SUPPORTED
}

func (es *eventSet) GetGpuOperationalEventContextLegacyXid_v1(uint32) (uint32, nvml.Return) {
	return 0, nvml.ERROR_NOT_SUPPORTED
}

func (es *eventSet) RegisterGpuOperationalEvents_v1(*nvml.GpuOperationalEventConfig_v1) nvml.Return {
	return nvml.ERROR_NOT_SUPPORTED
}
