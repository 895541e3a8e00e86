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

// Package discovery turns what NVML reports into gpudra's device model.
//
// It is one code path over any nvml.Interface: the real libnvidia-ml on a
// GPU node and the fake GPUs of package nvmlfake run exactly the same
// code, so whatever the tests prove against the fake holds on hardware as
// far as the fake is faithful. The caller owns the library's lifecycle
// (Init before, Shutdown after).
package discovery
