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

// Package cmdline is the command line that gpudra's daemons share
// (gpudra-kubelet-plugin and gpudra-controller): flags that an environment
// variable can also set, comma-separated lists, the logging flags and
// feature gates, and the Kubernetes client that --kubeconfig names.
//
// A flag on the command line wins over its environment variable, which wins
// over the flag's default; a variable set to the empty string counts as
// unset. The environment is parsed by the flag's own parser, so a value that
// does not parse is an error that names the variable and the flag, never a
// silent fallback to the default (DEVICE_METADATA=yes fails, =1 and =true
// mean true).
//
// Defaults are not defined here: each binary takes them from the package it
// configures (plugin.Default*, controller.Default*), so that the flag, the
// package's zero-value Config and the docs cannot disagree.
package cmdline
