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

// Health is what gpudra knows about a device's health.
type Health string

const (
	Healthy   Health = "Healthy"
	Unhealthy Health = "Unhealthy"
	Unknown   Health = "Unknown"
)

// HealthEvent reports a change in one GPU's health, e.g. after an XID error.
type HealthEvent struct {
	UUID   string
	Health Health
	// Reason is a short human-readable explanation ("XID 79: GPU has fallen
	// off the bus").
	Reason string
}
