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

package gpu

// Sample is what one device (a GPU or a MIG device) reported at one
// moment. A nil field is one the device does not report: NVML answers
// NOT_SUPPORTED for utilization on a GPU in MIG mode and on MIG devices,
// and for power on some boards.
type Sample struct {
	UUID string
	// Utilization is the fraction (0-1) of the last sample period in
	// which a kernel ran on the GPU; MemoryUtilization the fraction in
	// which memory was read or written.
	Utilization       *float64
	MemoryUtilization *float64
	// MemoryUsedBytes and MemoryTotalBytes are framebuffer memory.
	MemoryUsedBytes  *uint64
	MemoryTotalBytes *uint64
	// TemperatureCelsius is the GPU die's temperature.
	TemperatureCelsius *float64
	// PowerWatts is the board's power draw.
	PowerWatts *float64
}
