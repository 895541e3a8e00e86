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

// Use is how the claims prepared on a node hold one GPU.
type Use int

const (
	// Unused: no claim holds the GPU (or only claims with admin access,
	// which take nothing from others).
	Unused Use = iota
	// UsedWhole: claims hold the whole-GPU device: one claim alone, or
	// several through consumable-capacity shares. Either way the GPU
	// gives no MIG partition.
	UsedWhole
	// UsedByMIG: claims hold MIG partitions of the GPU.
	UsedByMIG
)
